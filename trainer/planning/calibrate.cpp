// The calibration run: a one-layer model at the rank's shapes (pipeline, virtual pipeline and data
// parallelism set to 1, which change no layer shape), built by build_rank_state as training
// builds it, over the replay's collectives. Inputs are zeros (no denormals, no data-dependent
// speed in the kernels timed). Every timed interval starts and ends synchronized with the device.
#include "trainer/planning/calibrate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>

#include "model/layer.h"
#include "parallel/core/replay_communicator.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "trainer/engine/rank_state.h"
#include "trainer/engine/training_data.h"
#include "trainer/planning/cost_model.h"
#include "trainer/util/version.h"
namespace trainer {
namespace {

using runtime::MemoryCategory;
using runtime::Tensor;
using Clock = std::chrono::steady_clock;

// The most rounds a calibration keeps (CalibrationOptions::min_seconds).
constexpr int kMaxRounds = 1000;
constexpr int64_t kMaxStepStashBytes = int64_t{1} << 30;  // Note [Cold stash]

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Seconds of `run`, synchronized on `on` before and after.
double timed(const Tensor& on, const std::function<void()>& run) {
  runtime::ops::synchronize(on);
  const auto start = Clock::now();
  run();
  runtime::ops::synchronize(on);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The model of the calibration: one layer, one stage, `replicas` replicas (calibrating side by
// side, never reducing gradients), one microbatch each, no recompute.
Config calibration_config(const Config& config, int64_t replicas) {
  Config c = config;
  c.parallel.pipeline = 1;
  c.parallel.virtual_pipeline = 1;
  c.parallel.layers_per_stage.clear();
  c.parallel.data = replicas;
  c.model.num_layers = 1;
  c.train.global_batch_size = c.train.micro_batch_size * replicas;
  c.recompute = {};
  c.optimizer.distributed = false;
  return c;
}

}  // namespace

std::string calibration_device(const Config& config, const runtime::Allocator& allocator) {
  if (config.train.device == Device::cuda && !allocator.device_name().empty())
    return "cuda: " + allocator.device_name();
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return "cpu: " + model + ", " + std::to_string(omp_get_max_threads()) + " threads";
}

namespace {

// Each piece's seconds over the repeats, by name.
class Samples {
 public:
  void add(const std::string& name, double seconds) { samples_[name].push_back(seconds); }
  double median_of(const std::string& name) const { return median(samples_.at(name)); }

 private:
  std::map<std::string, std::vector<double>> samples_;
};

}  // namespace

MeasuredRates measure_rates(runtime::Allocator& allocator, runtime::DType dtype) {
  // A GPU needs a larger GEMM to reach its rate than a CPU does.
  const int64_t n = allocator.device() == runtime::DeviceKind::cpu ? 1024 : 4096;
  constexpr int64_t copy_elements = int64_t{16} << 20;
  const Tensor a = Tensor::zeros(allocator, {n, n}, dtype, MemoryCategory::workspace);
  const Tensor b = Tensor::zeros(allocator, {n, n}, dtype, MemoryCategory::workspace);
  const Tensor c = Tensor::zeros(allocator, {n, n}, dtype, MemoryCategory::workspace);
  const Tensor src =
      Tensor::zeros(allocator, {copy_elements}, runtime::DType::f32, MemoryCategory::workspace);
  const Tensor dst =
      Tensor::zeros(allocator, {copy_elements}, runtime::DType::f32, MemoryCategory::workspace);
  double gemm = 1e30, copy = 1e30;
  for (int i = 0; i < 4; ++i) {
    gemm = std::min(
        gemm, timed(c, [&] {
          runtime::ops::linear_forward(
              {.out = c, .input = a, .weight = b, .rows = n, .in_features = n, .out_features = n});
        }));
    copy = std::min(copy, timed(dst, [&] { runtime::ops::copy(dst, src); }));
  }
  return {2.0 * n * n * n / gemm / 1e9, 2.0 * 4 * copy_elements / copy / 1e9};
}

MeasuredRates measure_host_rates() {
  static const MeasuredRates rates = [] {
    runtime::CpuAllocator allocator;
    return measure_rates(allocator, runtime::DType::f32);
  }();
  return rates;
}

parallel::ProcessGroups calibration_groups(const Config& config, int64_t world_size) {
  const parallel::ParallelConfig& p = config.parallel;
  const int64_t group = p.tensor * p.context;
  if (world_size % group != 0)
    throw runtime::InputError(
        TRAINER_STR("calibrate: " << world_size << " ranks are not a multiple of parallel.tensor x "
                                  << "parallel.context = " << p.tensor << " x " << p.context
                                  << " = " << group));
  return parallel::ProcessGroups::from_mpi(calibration_config(config, world_size / group).parallel);
}

// Note [Timed documents]
// Under data.reset_attention_mask flash skips the key tiles before each query's document, so a
// layer's time depends on the documents (docs/attention.md, "Documents": steps 1.4x to 3.6x
// faster with documents of 2048 to 128 tokens in scripts/bench_documents.sh). The calibration times
// its rounds with the documents of the run's own first microbatches, one microbatch a round in
// turn, so that the medians sample them as a step's microbatches do; the profile's shapes then end
// in "documents", and only a run that masks documents prices with it (CostModel::matches).

// The mean length of the documents a calibration times: tokens over documents, counting each
// sample's documents (a document cut by the sequence's end, or begun before it, counts whole).
double mean_document_length(const CalibrationOptions& options, int64_t micro_batch) {
  const auto B = static_cast<size_t>(micro_batch);
  size_t tokens = 0, documents = 0;
  for (const std::vector<int32_t>& starts : options.document_starts) {
    tokens += starts.size();
    for (size_t row = 0; row < starts.size(); ++row)
      documents += row < B || starts[row] != starts[row - B];
  }
  return documents > 0 ? static_cast<double>(tokens) / static_cast<double>(documents) : 0.0;
}

std::vector<std::vector<int32_t>> calibration_documents(const Config& config) {
  if (!config.data.reset_attention_mask) return {};
  constexpr int64_t kMaxMicrobatches = 8;
  const TrainConfig& t = config.train;
  const TrainingData data(config);
  return leading_document_starts(
      data, config.model.seq_length, t.micro_batch_size,
      std::clamp<int64_t>(t.global_batch_size / t.micro_batch_size, 1, kMaxMicrobatches));
}

namespace {

// options.document_starts on `allocator`'s device, each cut to the rank's rows of `dims`.
std::vector<Tensor> timed_documents(const Config& config, const model::LayerDims& dims,
                                    const CalibrationOptions& options,
                                    runtime::Allocator& allocator) {
  if (options.document_starts.empty() != !config.data.reset_attention_mask) {
    throw runtime::InputError(TRAINER_STR("calibration: data.reset_attention_mask is "
                                          << (config.data.reset_attention_mask ? "true" : "false")
                                          << " but " << options.document_starts.size()
                                          << " microbatches of documents were given"));
  }
  const parallel::ContextShard shard = dims.context();
  const int64_t T = shard.local_seq(), B = dims.micro_batch;
  runtime::CpuAllocator host_allocator;
  std::vector<Tensor> tensors;
  for (const std::vector<int32_t>& whole : options.document_starts) {
    TRAINER_ASSERT(
        static_cast<int64_t>(whole.size()) == shard.seq * B,
        "calibration documents of " << whole.size() << " starts for " << shard.seq << " x " << B);
    const Tensor host =
        Tensor::empty(host_allocator, {T, B}, runtime::DType::i32, MemoryCategory::workspace);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t b = 0; b < B; ++b)
        host.i32()[i * B + b] = whole[static_cast<size_t>(shard.position(i) * B + b)];
    tensors.push_back(
        Tensor::empty(allocator, {T, B}, runtime::DType::i32, MemoryCategory::activation));
    runtime::ops::upload(tensors.back(), host);
  }
  return tensors;
}

}  // namespace

TimeProfile calibrate(const Config& config, runtime::Allocator& allocator,
                      const CalibrationOptions& options, parallel::ProcessGroups* peers) {
  parallel::ProcessGroups replay;
  if (!peers) replay = parallel::replay_groups(calibration_config(config, 1).parallel, 0);
  parallel::ProcessGroups& groups = peers ? *peers : replay;
  const Config c = calibration_config(config, groups.config.data);
  RankState state;
  build_rank_state(state, c, groups, allocator, [&](RankState& s) {
    model::init_params(s.has_master_copy() ? s.master : s.params, c.model, c.train.seed);
    if (s.has_master_copy()) runtime::ops::convert(s.params.flat, s.master.flat);
  });
  const model::LayerDims& dims = state.setup.dims;
  const model::LayerGroups where = layer_groups(groups);
  const model::LayerParams& weights = state.params.layers[0];
  const model::LayerParams& grads = state.grads.layers[0];
  const std::vector<Tensor> documents = timed_documents(config, dims, options, allocator);
  model::LayerContext context{.layer = 0, .seed = c.train.seed, .step = 1};
  const runtime::Shape hidden_shape{dims.seq_shard(), dims.micro_batch, dims.hidden};
  const Tensor input =
      Tensor::zeros(allocator, hidden_shape, dims.activation_dtype, MemoryCategory::workspace);
  const Tensor dout =
      Tensor::zeros(allocator, hidden_shape, dims.activation_dtype, MemoryCategory::workspace);
  // none, then each selective module alone (the pieces every entry's rebuild is summed from).
  std::vector<model::LayerRecompute> entries{{}};
  for (size_t m = 0; m < model::selective_module_table().size(); ++m)
    entries.push_back(single_module_entry(m));
  const int64_t T = dims.context().local_seq(), B = dims.micro_batch;
  recompute::ChunkExecutor& chunk = *state.chunks[0];

  // Note [Cold stash]
  // The pieces above run again and again on the same buffers, so the backward finds its stash
  // where the forward just left it. In a step it does not: every layer of the rank (and, on the
  // first stage, every microbatch in flight) keeps a stash of its own in buffers of its own
  // until its backward. Measured on a 2-core Xeon VM (8 layers of hidden 128, seq 256,
  // microbatch 2), a step's layers took 2.62 ms forward and 3.50 ms backward against 2.25 and
  // 2.86 calibrated, so a step without recompute ran 23% slower than predicted, while full
  // recompute, which rebuilds its stash just before its backward, matched. So plan none's
  // forward is also timed as a step runs it, once per layer of the model into stashes that stay
  // alive (as many as fit in kMaxStepStashBytes), and their backwards in reverse order; what
  // these add to the times above is kept as stash_cold_forward_s / stash_cold_backward_s. The
  // cost model charges a layer the share of it that its entry's stash is of none's
  // (RankTimes::kept_share), and lowers a rebuild's price by what the stash it drops would have
  // cost.
  const int64_t kept_none =
      model::stash_kept_bytes(model::layer_stash_spec(dims, model::LayerRecompute{}));
  const int64_t step_stashes =
      std::clamp<int64_t>(kMaxStepStashBytes / std::max<int64_t>(kept_none, 1), 1,
                          std::max<int64_t>(config.model.num_layers, 1));

  // Note [Calibration window]
  // A virtual machine's speed drifts over seconds (steps of one training process on 2 shared
  // cores measured 403-668 ms): a calibration of a few rounds, some 50 ms, catches one moment,
  // and three in a row measured a layer's forward + backward at 6.43, 7.64 and 7.81 ms. The
  // rounds are therefore repeated until they span min_seconds, so that the medians sample the
  // drift as a training step does.
  // Ranks calibrating side by side run the same rounds (their collectives pair up): rank 0's
  // clock decides.
  Samples samples;
  Clock::time_point kept_since;
  auto more_rounds = [&](int run) {
    if (run < options.warmup + options.repeats) return true;
    if (run >= options.warmup + kMaxRounds) return false;
    bool more =
        std::chrono::duration<double>(Clock::now() - kept_since).count() < options.min_seconds;
    if (peers) groups.world->broadcast(&more, sizeof more, 0);
    return more;
  };
  int kept = 0;
  for (int run = 0; more_rounds(run); ++run) {
    const bool keep = run >= options.warmup;
    if (!documents.empty()) {  // Note [Timed documents]
      context.document_starts = documents[static_cast<size_t>(run) % documents.size()];
      if (config.data.reset_position_ids) context.position_starts = context.document_starts;
    }
    if (run == options.warmup) kept_since = Clock::now();
    if (keep) ++kept;
    auto record = [&](const std::string& name, double seconds) {
      if (keep) samples.add(name, seconds);
    };
    for (const model::LayerRecompute& entry : entries) {
      const std::string name = model::to_string(entry);
      model::LayerStash stash;
      Tensor out =
          Tensor::empty(allocator, hidden_shape, dims.activation_dtype, MemoryCategory::workspace);
      record(name + " forward", timed(input, [&] {
               model::layer_forward(out, stash, input, weights, dims, where, entry, context,
                                    allocator);
             }));
      record(name + " rebuild", timed(input, [&] {
               model::layer_rebuild(stash, weights, dims, where, entry, context, allocator);
             }));
      record(name + " backward", timed(input, [&] {
               model::layer_backward(stash, dout, weights, grads, dims, where, {}, context,
                                     allocator);
             }));
      if (entry.mode != model::RecomputeMode::none) continue;
      std::vector<model::LayerStash> stashes(static_cast<size_t>(step_stashes));
      std::vector<Tensor> outs;  // Note [Cold stash]
      for (model::LayerStash& held : stashes) {
        outs.push_back(Tensor::empty(allocator, hidden_shape, dims.activation_dtype,
                                     MemoryCategory::workspace));
        record(name + " forward in a step", timed(input, [&] {
                 model::layer_forward(outs.back(), held, input, weights, dims, where, entry,
                                      context, allocator);
               }));
      }
      for (auto held = stashes.rbegin(); held != stashes.rend(); ++held) {
        record(name + " backward in a step", timed(input, [&] {
                 model::layer_backward(*held, dout, weights, grads, dims, where, {}, context,
                                       allocator);
               }));
      }
    }
    recompute::Microbatch micro;
    micro.tokens =
        Tensor::zeros(allocator, {T, B}, runtime::DType::i32, MemoryCategory::activation);
    micro.targets =
        Tensor::zeros(allocator, {T, B}, runtime::DType::i32, MemoryCategory::activation);
    micro.document_starts = context.document_starts;
    micro.position_starts = context.position_starts;
    record("chunk forward", timed(input, [&] {
             chunk.forward_step(micro, recompute::StepInfo{c.train.seed, 1});
           }));
    record("chunk backward", timed(input, [&] { chunk.backward_step(1.0f); }));
    record("optimizer", timed(input, [&] {
             const double norm = state.optimizer->grad_norm(groups, state.grads, true);
             clip_gradients(state.grads, norm, c.optimizer.clip_grad);
             state.optimizer->step(groups, state.grads, c.optimizer, c.optimizer.lr, run + 1);
             runtime::ops::zero(state.grads.flat);  // a step's first act, per parameter too
           }));
  }

  TimeProfile p;
  p.device = calibration_device(config, allocator);
  p.dtype = std::string(runtime::dtype_name(dims.activation_dtype));
  p.shapes = profile_shape_key(c, state.setup);
  p.build = std::string(version()) + " " + git_revision();
  p.repeats = kept;
  const MeasuredRates rates = measure_rates(allocator, dims.activation_dtype);
  p.gemm_gflops = rates.gemm_gflops;
  p.copy_gbps = rates.copy_gbps;
  const std::string none = model::to_string(model::LayerRecompute{});
  p.layer_forward_s = samples.median_of(none + " forward");
  p.layer_backward_s = samples.median_of(none + " backward");
  p.stash_cold_forward_s =
      std::max(0.0, samples.median_of(none + " forward in a step") - p.layer_forward_s);
  p.stash_cold_backward_s =
      std::max(0.0, samples.median_of(none + " backward in a step") - p.layer_backward_s);
  for (const model::LayerRecompute& entry : entries)
    if (entry.mode == model::RecomputeMode::selective)
      p.rebuild.push_back(
          {model::to_string(entry), samples.median_of(model::to_string(entry) + " rebuild")});
  p.embedding_head_forward_s =
      std::max(0.0, samples.median_of("chunk forward") - p.layer_forward_s);
  p.embedding_head_backward_s =
      std::max(0.0, samples.median_of("chunk backward") - p.layer_backward_s);
  p.optimizer_s_per_param =
      samples.median_of("optimizer") / static_cast<double>(state.params.flat.numel());
  p.ranks = peers ? groups.world_size() : 1;
  p.collectives_measured = peers && c.parallel.tensor * c.parallel.context > 1;
  return p;
}

}  // namespace trainer
