// The step-time prediction: per-op times, the schedule simulation across stages, the rest.
#include "trainer/planning/step_time.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "model/gpt_params.h"
#include "model/recompute_modules.h"
#include "parallel/pipeline/schedules.h"
#include "runtime/error.h"

namespace trainer {
namespace {

constexpr double kGB = 1e9;

// A group of `size` ranks `stride` apart: intra-node when it spans at most a node.
bool intra_node(const LinkBandwidths& links, int64_t stride, int64_t size) {
  return stride * size <= links.ranks_per_node;
}

double group_gbps(const LinkBandwidths& links, int64_t stride, int64_t size) {
  return intra_node(links, stride, size) ? links.intra_gbps : links.inter_gbps;
}

enum class Collective { all_gather, reduce_scatter, all_reduce };

// A ring collective of `bytes` over the group; sums within a node at reduce_gbps where known.
double collective_s(const LinkBandwidths& links, double bytes, int64_t stride, int64_t size,
                    Collective kind) {
  if (size <= 1) return 0;
  const double share = static_cast<double>(size - 1) / static_cast<double>(size);
  const bool sums = kind != Collective::all_gather;
  const double gbps = sums && links.reduce_gbps > 0 && intra_node(links, stride, size)
                          ? links.reduce_gbps
                          : group_gbps(links, stride, size);
  return (kind == Collective::all_reduce ? 2 : 1) * share * bytes / (gbps * kGB) +
         links.latency_s * static_cast<double>(size - 1);
}

// One op's time in the schedule: every layer of the chunk, the embedding or head it holds.
struct ChunkTimes {
  double forward_s = 0, backward_s = 0, recompute_s = 0;
};

// `features`: the blocks' (which GEMM inputs a selective rebuild all-gathers again under sequence
// parallelism, each at comm.rebuild_gather_s).
ChunkTimes chunk_times(const StageChunk& chunk, const RankTimes& t, const CommTimes& comm,
                       const model::BlockFeatures& features) {
  ChunkTimes c;
  const recompute::RecomputePlan& plan = chunk.plan;
  for (int64_t i = 0; i < plan.num_layers(); ++i) {
    const model::LayerRecompute& entry = plan.layers[static_cast<size_t>(i)];
    c.forward_s += t.layer_forward_s + t.cold_forward_s(entry) + comm.layer_forward_s;
    c.backward_s += t.layer_backward_s + t.cold_backward_s(entry) + comm.layer_backward_s;
    double rebuild = 0;
    if (plan.is_full(i)) {
      rebuild = t.layer_forward_s + comm.layer_forward_s;
    } else if (entry.mode == model::RecomputeMode::selective) {
      rebuild = t.rebuild_s(entry);
    }
    rebuild +=
        static_cast<double>(model::rebuild_input_gathers(entry, features)) * comm.rebuild_gather_s;
    c.recompute_s += rebuild;
  }
  c.backward_s += c.recompute_s;
  if (chunk.spec.embedding) {
    c.forward_s += t.embedding_forward_s;
    c.backward_s += t.embedding_backward_s;
  }
  if (chunk.spec.head) {
    c.forward_s += t.head_forward_s;
    c.backward_s += t.head_backward_s;
  }
  return c;
}

// The schedule of every stage run against the dependencies between them: a forward of model
// chunk k needs k - 1's forward of the same microbatch (plus a send), a backward of chunk k
// needs k + 1's backward (the last chunk's needs its own forward, earlier on the same stage).
// Returns each stage's finish time.
std::vector<double> simulate(const Config& config, const std::vector<StageSetup>& setups,
                             const std::vector<std::vector<ChunkTimes>>& times, double p2p_s) {
  const int64_t pp = config.parallel.pipeline;
  const int64_t V = static_cast<int64_t>(setups[0].chunks.size());
  const int64_t K = pp * V, M = setups[0].num_microbatches;
  std::vector<std::vector<parallel::ScheduleOp>> ops;
  for (int64_t s = 0; s < pp; ++s)
    ops.push_back(parallel::schedule_ops(setups[static_cast<size_t>(s)].schedule, pp, s, V, M));
  auto at = [&](std::vector<double>& v, int64_t mb, int64_t k) -> double& {
    return v[static_cast<size_t>(mb * K + k)];
  };
  std::vector<double> forward_end(static_cast<size_t>(M * K), -1),
      backward_end(static_cast<size_t>(M * K), -1);
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  std::vector<double> clock(static_cast<size_t>(pp), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < pp; ++s) {
      auto& i = next[static_cast<size_t>(s)];
      for (; i < ops[static_cast<size_t>(s)].size(); ++i) {
        const parallel::ScheduleOp& op = ops[static_cast<size_t>(s)][i];
        const int64_t k = op.chunk * pp + s;
        double ready = 0;
        if (op.forward && k > 0) {
          const double dep = at(forward_end, op.microbatch, k - 1);
          if (dep < 0) break;
          ready = dep + p2p_s;
        } else if (!op.forward && k < K - 1) {
          const double dep = at(backward_end, op.microbatch, k + 1);
          if (dep < 0) break;
          ready = dep + p2p_s;
        }
        const ChunkTimes& c = times[static_cast<size_t>(s)][static_cast<size_t>(op.chunk)];
        double& now = clock[static_cast<size_t>(s)];
        now = std::max(now, ready) + (op.forward ? c.forward_s : c.backward_s);
        at(op.forward ? forward_end : backward_end, op.microbatch, k) = now;
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < pp; ++s)
    TRAINER_ASSERT(next[static_cast<size_t>(s)] == ops[static_cast<size_t>(s)].size(),
                   "the schedule of stage " << s << " waits for ever in the simulation");
  return clock;
}

double parse_positive(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value > 0))
    throw runtime::InputError("plan: --link-gbps " + flag + " needs a number > 0, got '" + text +
                              "'");
  return value;
}

}  // namespace

LinkBandwidths default_links(const Config& config) {
  if (config.train.device == Device::cuda)
    return {.intra_gbps = 360,
            .inter_gbps = 45,
            .ranks_per_node = 8,
            .latency_s = 10e-6,
            .source =
                "stated: NVLink 4 360 GB/s bus bandwidth within a node of 8, 400 Gb/s "
                "InfiniBand 45 GB/s across"};
  return {.intra_gbps = 5,
          .inter_gbps = 5,
          .ranks_per_node = 1 << 20,
          .latency_s = 5e-6,
          .reduce_gbps = 2,
          .source =
              "stated: MPI over shared memory, 5 GB/s, sums (all-reduce, reduce-scatter) "
              "2 GB/s"};
}

std::string reduce_words(const LinkBandwidths& links) {
  if (links.reduce_gbps <= 0) return "at the link's";
  char text[40];
  std::snprintf(text, sizeof text, "at %.1f GB/s", links.reduce_gbps);
  return text;
}

LinkBandwidths parse_links(const std::string& text, LinkBandwidths links) {
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq),
                      value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "intra") {
      links.intra_gbps = parse_positive(key, value);
    } else if (key == "inter") {
      links.inter_gbps = parse_positive(key, value);
    } else if (key == "ranks-per-node") {
      links.ranks_per_node = static_cast<int64_t>(parse_positive(key, value));
    } else if (key == "reduce") {
      links.reduce_gbps = parse_positive(key, value);
    } else if (key == "latency-us") {
      links.latency_s = parse_positive(key, value) * 1e-6;
    } else {
      throw runtime::InputError(
          "plan: --link-gbps takes intra=, inter=, reduce=, ranks-per-node= and latency-us=, got "
          "'" +
          item + "'");
    }
  }
  char source[200];
  std::snprintf(source, sizeof source,
                "given: intra %g GB/s, inter %g GB/s, sums within a node %s, %lld ranks per node, "
                "%g us per message",
                links.intra_gbps, links.inter_gbps, reduce_words(links).c_str(),
                static_cast<long long>(links.ranks_per_node), links.latency_s * 1e6);
  links.source = source;
  return links;
}

bool reduction_hides_behind_backward(const Config& config) {
  return config.optimizer.overlap_grad_reduce && config.train.device == Device::cuda;
}

CommTimes comm_times(const Config& config, const StageSetup& setup, const LinkBandwidths& links,
                     const RankTimes& times) {
  const parallel::ParallelConfig& p = config.parallel;
  const model::LayerDims& d = setup.dims;
  const double s = static_cast<double>(runtime::dtype_size(d.activation_dtype));
  const double hidden = static_cast<double>(d.seq * d.micro_batch * d.hidden) * s;  // (T, B, C)
  CommTimes c;
  if (p.tensor > 1 && !times.collectives_included) {
    // Forward: two all-reduces (attention and MLP outputs), or two all-gathers and two
    // reduce-scatters under sequence parallelism; backward the same again.
    const double boundary =
        p.sequence_parallel
            ? collective_s(links, hidden, 1, p.tensor, Collective::all_gather) +
                  collective_s(links, hidden, 1, p.tensor, Collective::reduce_scatter)
            : collective_s(links, hidden, 1, p.tensor, Collective::all_reduce);
    c.layer_forward_s = 2 * boundary;
    c.layer_backward_s = c.layer_forward_s;
    if (p.sequence_parallel)
      c.rebuild_gather_s = collective_s(links, hidden, 1, p.tensor, Collective::all_gather);
  }
  if (p.context > 1 && !times.collectives_included) {
    // The ring passes each rank's keys and values on cp - 1 times; backward passes them and
    // their gradients.
    const double kv =
        2.0 * static_cast<double>(d.seq * d.micro_batch * d.kv_heads() * d.head_dim) * s;
    const double gbps = group_gbps(links, p.tensor, p.context);
    const double hop = kv / (gbps * kGB) + links.latency_s;
    c.layer_forward_s += static_cast<double>(p.context - 1) * hop;
    c.layer_backward_s += static_cast<double>(p.context - 1) * 2 * hop;
  }
  const int64_t stage_stride = p.tensor * p.context * p.data;
  if (p.pipeline > 1) {
    const double bytes = static_cast<double>(d.seq_shard() * d.micro_batch * d.hidden) * s;
    c.p2p_s = bytes / (group_gbps(links, stage_stride, p.pipeline) * kGB) + links.latency_s;
  }
  const double params = static_cast<double>(model::GptParams::count(config.model, setup.shard));
  const int64_t replicas = p.replicas();
  if (replicas > 1) {
    const double grad_bytes = 4 * params;
    c.grad_reduce_s =
        config.optimizer.distributed
            ? collective_s(links, grad_bytes, p.tensor, replicas, Collective::reduce_scatter) +
                  collective_s(links, params * s, p.tensor, replicas, Collective::all_gather)
            : collective_s(links, grad_bytes, p.tensor, replicas, Collective::all_reduce);
  }
  if (p.pipeline > 1 && !config.model.untie_embeddings &&
      (setup.shard.embedding || setup.shard.head)) {
    const double table = static_cast<double>(vocab_shard(config) * config.model.hidden_size) * 4;
    c.embedding_sync_s =
        collective_s(links, table, stage_stride * (p.pipeline - 1), 2, Collective::all_reduce);
  }
  return c;
}

RecomputePrices stage_time_prices(const Config& config, const StageSetup& setup,
                                  const CostModel& costs, const LinkBandwidths& links) {
  const RankTimes times = costs.times(config, setup);
  const CommTimes comm = comm_times(config, setup, links, times);
  return time_prices(times, setup.dims, comm.rebuild_gather_s, comm.layer_forward_s);
}

StepPrediction predict_step_time(const Config& config, const CostModel& costs,
                                 const LinkBandwidths& links) {
  const parallel::ParallelConfig& p = config.parallel;
  std::vector<StageSetup> setups;
  std::vector<std::vector<ChunkTimes>> times;
  StepPrediction prediction;
  double model_flops = 0;
  double p2p_s = 0;
  for (int64_t stage = 0; stage < p.pipeline; ++stage) {
    setups.push_back(make_stage_setup(config, stage, 0));
    const StageSetup& setup = setups.back();
    const RankTimes t = costs.times(config, setup);
    const CommTimes comm = comm_times(config, setup, links, t);
    p2p_s = comm.p2p_s;
    std::vector<ChunkTimes> chunks;
    StagePrediction sp;
    for (const StageChunk& chunk : setup.chunks) {
      const ChunkTimes c = chunk_times(chunk, t, comm, setup.dims.features);
      const double M = static_cast<double>(setup.num_microbatches);
      sp.busy_s += M * (c.forward_s + c.backward_s);
      sp.recompute_s += M * c.recompute_s;
      chunks.push_back(c);
    }
    const double params = static_cast<double>(model::GptParams::count(config.model, setup.shard));
    const double updated =
        config.optimizer.distributed ? params / static_cast<double>(p.replicas()) : params;
    sp.optimizer_s = updated * t.optimizer_s_per_param;
    const double backward_busy = [&] {
      double b = 0;
      for (const ChunkTimes& c : chunks) b += c.backward_s;
      return b * static_cast<double>(setup.num_microbatches);
    }();
    sp.reduce_s =
        (reduction_hides_behind_backward(config) ? std::max(0.0, comm.grad_reduce_s - backward_busy)
                                                 : comm.grad_reduce_s) +
        comm.embedding_sync_s;
    prediction.stages.push_back(sp);
    times.push_back(std::move(chunks));
    model_flops += static_cast<double>(setup.model_flops_per_step) *
                   static_cast<double>(p.tensor * p.context * p.data);
  }
  const std::vector<double> finish = simulate(config, setups, times, p2p_s);
  size_t slowest = 0;
  for (size_t s = 0; s < prediction.stages.size(); ++s) {
    prediction.stages[s].finish_s = finish[s];
    if (prediction.stages[s].total_s() > prediction.stages[slowest].total_s()) slowest = s;
  }
  const StagePrediction& worst = prediction.stages[slowest];
  prediction.step_s = worst.total_s();
  prediction.bubble_s = std::max(0.0, worst.finish_s - worst.busy_s);
  prediction.recompute_s = worst.recompute_s;
  const double tokens =
      static_cast<double>(config.train.global_batch_size * config.model.seq_length);
  prediction.tokens_per_s = tokens / prediction.step_s;
  prediction.mfu_percent = 100 * model_flops / prediction.step_s /
                           (costs.peak_gflops() * 1e9 * static_cast<double>(p.world_size()));
  prediction.source = costs.source(config, setups[0]);
  if (p.world_size() > 1) prediction.links = links.source;
  return prediction;
}

}  // namespace trainer
