// Ping-pong between rank 0 and a peer: the best of a few round trips, bandwidth from the large
// message (two transfers per trip), latency from the small one (half a trip). When every rank
// shares rank 0's node, an all-reduce of the large message over them all gives the bus bandwidth
// of sums (2(n-1)/n of the payload per rank, over the best time).
#include "trainer/planning/link_measure.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace trainer {
namespace {

constexpr int64_t kLargeBytes = int64_t{64} << 20;
constexpr int kTrips = 3;
constexpr int kTag = 77;

int32_t host_id() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return static_cast<int32_t>(std::hash<std::string>{}(name)&0x7fffffff);
}

// The best of kTrips timed runs of `run` after one that warms the path up, each started together
// on every rank (seconds).
template <class Run>
double best_time(parallel::Communicator& world, const Run& run) {
  double best = 1e30;
  for (int trip = 0; trip < kTrips + 1; ++trip) {
    world.barrier();
    const auto start = std::chrono::steady_clock::now();
    run();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (trip > 0) best = std::min(best, seconds);
  }
  return best;
}

// The best round trip of `bytes` between rank 0 and `peer`, seconds (rank 0's is the one used).
double round_trip(parallel::Communicator& world, int peer, int64_t bytes,
                  std::vector<float>& buffer) {
  return best_time(world, [&] {
    if (world.rank() == 0) {
      world.send_async(buffer.data(), bytes, peer, kTag)->wait();
      world.recv(buffer.data(), bytes, peer, kTag);
    } else if (world.rank() == peer) {
      world.recv(buffer.data(), bytes, 0, kTag);
      world.send_async(buffer.data(), bytes, 0, kTag)->wait();
    }
  });
}

// The best all-reduce of `buffer` as f32 (it holds zeros) over the world, seconds, on every rank.
double all_reduce_time(parallel::Communicator& world, std::vector<float>& buffer) {
  return best_time(world, [&] {
    world.all_reduce_sum(buffer.data(), static_cast<int64_t>(buffer.size()), runtime::DType::f32);
  });
}

}  // namespace

LinkBandwidths measure_links(parallel::Communicator& world, const LinkBandwidths& stated) {
  const int n = world.size();
  std::vector<int32_t> hosts(static_cast<size_t>(n));
  const int32_t mine = host_id();
  world.all_gather(hosts.data(), &mine, 1, runtime::DType::i32);
  int intra = -1, inter = -1, on_node = 0;
  for (int r = 0; r < n; ++r) {
    const bool same = hosts[static_cast<size_t>(r)] == hosts[0];
    on_node += same;
    if (r > 0 && same && intra < 0) intra = r;
    if (!same && inter < 0) inter = r;
  }
  std::vector<float> buffer(static_cast<size_t>(kLargeBytes) / sizeof(float));
  LinkBandwidths links = stated;
  links.ranks_per_node = on_node;
  double results[4] = {links.intra_gbps, links.inter_gbps, links.latency_s, links.reduce_gbps};
  if (intra > 0) {
    results[0] = 2.0 * kLargeBytes / round_trip(world, intra, kLargeBytes, buffer) / 1e9;
    results[2] = round_trip(world, intra, 8, buffer) / 2;
  }
  if (inter > 0) {
    results[1] = 2.0 * kLargeBytes / round_trip(world, inter, kLargeBytes, buffer) / 1e9;
    results[2] = std::max(results[2], round_trip(world, inter, 8, buffer) / 2);
  }
  // Collective: every rank takes part (all of them on rank 0's node, or none).
  const bool sums_measured = intra > 0 && on_node == n;
  if (sums_measured) {
    const double share = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
    results[3] = share * kLargeBytes / all_reduce_time(world, buffer) / 1e9;
  }
  world.broadcast(results, sizeof results, 0);
  links.intra_gbps = results[0];
  links.inter_gbps = results[1];
  links.latency_s = results[2];
  links.reduce_gbps = results[3];
  char source[260];
  std::snprintf(source, sizeof source,
                "measured under mpirun: %d ranks, %d on rank 0's node; intra %.1f GB/s%s, inter "
                "%.1f GB/s%s, sums within a node %s%s, %.1f us per message",
                n, on_node, links.intra_gbps, intra > 0 ? "" : " (stated: no peer)",
                links.inter_gbps, inter > 0 ? "" : " (stated: no peer)",
                reduce_words(links).c_str(), sums_measured ? " (all-reduce)" : "",
                links.latency_s * 1e6);
  links.source = source;
  return links;
}

}  // namespace trainer
