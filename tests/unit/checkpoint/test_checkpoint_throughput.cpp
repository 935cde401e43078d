// A measurement, not a test (hence DISABLED_): saves and loads a 1 GiB checkpoint and prints MB/s.
// Run: test_checkpoint --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'; directory:
// $CHECKPOINT_BENCH_DIR or /tmp; CHECKPOINT_BENCH_DROP_CACHES=1 (root) loads from a cold cache.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "checkpoint_test_util.h"
#include "trainer/checkpoint/checkpoint.h"

namespace trainer::checkpoint_test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(CheckpointThroughput, DISABLED_SaveAndLoadOneGigabyte) {
  constexpr int64_t kTensors = 16;
  constexpr int64_t kRows = 4096, kColumns = 4096;  // 64 MiB of f32 per tensor, 1 GiB in all
  const char* bench_dir = std::getenv("CHECKPOINT_BENCH_DIR");
  const fs::path dir =
      fs::path(bench_dir != nullptr ? bench_dir : fs::temp_directory_path().c_str()) /
      ("trainer_checkpoint_bench_" + std::to_string(::getpid()));
  fs::remove_all(dir);

  std::vector<std::vector<float>> tensors(kTensors);
  std::vector<TensorShard> shards;
  for (int64_t t = 0; t < kTensors; ++t) {
    tensors[static_cast<size_t>(t)] = distinct_values(kRows * kColumns, static_cast<float>(t));
    shards.push_back({"param/t" + std::to_string(t),
                      {kRows, kColumns},
                      {},
                      runtime::DType::f32,
                      tensors[static_cast<size_t>(t)].data()});
  }
  const double megabytes = static_cast<double>(kTensors * kRows * kColumns * 4) / 1e6;
  CheckpointMeta meta;
  meta.step = 1;
  parallel::SelfCommunicator self;

  const Clock::time_point save_start = Clock::now();
  save_checkpoint(dir.string(), meta, shards, true, 1, self);
  const double save_seconds = seconds_since(save_start);

  const char* drop_caches = std::getenv("CHECKPOINT_BENCH_DROP_CACHES");
  const bool cold = drop_caches != nullptr && std::string(drop_caches) == "1";
  if (cold) {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  const Clock::time_point open_start = Clock::now();
  const CheckpointReader reader(*find_checkpoint(dir.string(), "auto"));  // checksums every byte
  const double open_seconds = seconds_since(open_start);

  std::vector<float> out(static_cast<size_t>(kRows * kColumns));
  double read_seconds = 0;  // the comparisons are not timed
  bool identical = true;
  for (int64_t t = 0; t < kTensors; ++t) {
    const Clock::time_point read_start = Clock::now();
    reader.read("param/t" + std::to_string(t), {kRows, kColumns}, {}, runtime::DType::f32,
                out.data());
    read_seconds += seconds_since(read_start);
    identical = identical && out == tensors[static_cast<size_t>(t)];
  }

  const Clock::time_point slice_start = Clock::now();  // tp4 along dim 1: 4096 rows of 4 KiB each
  for (int64_t t = 0; t < kTensors; ++t)
    for (int64_t part = 0; part < 4; ++part)
      reader.read("param/t" + std::to_string(t), {kRows, kColumns},
                  {1, part * kColumns / 4, kColumns / 4}, runtime::DType::f32, out.data());
  const double slice_seconds = seconds_since(slice_start);
  fs::remove_all(dir);

  EXPECT_TRUE(identical);
  const auto report = [&](const char* what, double seconds) {
    std::printf("  %-48s %7.3f s %8.0f MB/s\n", what, seconds, megabytes / seconds);
  };
  std::printf("checkpoint of %.0f MB in %s\n", megabytes, dir.parent_path().c_str());
  report("save (write + fsync + manifest + rename)", save_seconds);
  report(cold ? "open (mmap + xxh64 of every byte, cold cache)"
              : "open (mmap + xxh64 of every byte, warm cache)",
         open_seconds);
  report("read whole tensors (mapped file -> memory)", read_seconds);
  report("read tp4 column slices (4 KiB rows)", slice_seconds);
}

}  // namespace
}  // namespace trainer::checkpoint_test
