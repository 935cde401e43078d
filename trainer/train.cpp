// Training loop. Rules: gradients are zeroed at the start of each step and
// accumulate over its microbatches; the loss logged for step s is the mean token
// loss of the batch step s trained on, computed before its update.
#include "trainer/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "model/flops.h"
#include "runtime/kernels/cpu/gemm.h"
#include "parallel/schedules.h"
#include "trainer/export/hf_gpt2.h"
#include "trainer/lr_schedule.h"

namespace trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, value);
  return buffer;
}

}  // namespace

std::string describe_plan(const recompute::RecomputePlan& plan) {
  std::ostringstream text;
  for (int64_t i = 0; i < plan.num_layers();) {
    int64_t j = i;
    const std::string entry = model::to_string(plan.layers[static_cast<size_t>(i)]);
    while (j + 1 < plan.num_layers() &&
           model::to_string(plan.layers[static_cast<size_t>(j + 1)]) == entry)
      ++j;
    text << (i > 0 ? ", " : "") << "layers " << i;
    if (j > i) text << "-" << j;
    text << " " << entry;
    i = j + 1;
  }
  return text.str();
}

double measure_sgemm_gflops() {
  constexpr int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 1e30;
  for (int repeat = 0; repeat < 5; ++repeat) {
    const auto start = Clock::now();
    runtime::cpu::sgemm(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * n / best / 1e9;
}

void check_supported(const Config& c) {
  const auto unsupported = [](const std::string& path, const std::string& what) {
    throw runtime::ConfigError(path, what + " is not supported by this build of the trainer yet");
  };
  if (c.train.device != Device::cpu) unsupported("train.device", "device cuda");
  if (c.parallel.tensor != 1) unsupported("parallel.tensor", "tensor parallelism");
  if (c.parallel.pipeline != 1) unsupported("parallel.pipeline", "pipeline parallelism");
  if (c.parallel.virtual_pipeline != 1) unsupported("parallel.virtual_pipeline", "interleaving");
}

Trainer::Trainer(const Config& config, parallel::ProcessGroups& groups,
                 runtime::Allocator& allocator, std::ostream& log)
    : config_(config), groups_(groups), allocator_(allocator), log_(log) {
  validate_config(config_);
  validate_launch(config_, groups_.world_size());
  check_supported(config_);
  const model::GptConfig& m = config_.model;
  const TrainConfig& t = config_.train;
  const int64_t dp = config_.parallel.data;
  num_microbatches_ = t.global_batch_size / (t.micro_batch_size * dp);

  std::error_code error;
  std::filesystem::create_directories(config_.output.dir, error);
  if (error) {
    throw runtime::ConfigError("output.dir", "cannot create '" + config_.output.dir +
                                                 "': " + error.message());
  }

  dataset_ = std::make_unique<IndexedDataset>(config_.data.path);
  const std::vector<SampleRange> ranges = split_samples(*dataset_, m.seq_length, config_.data.split);
  train_sampler_ = std::make_unique<GptSampler>(*dataset_, m.seq_length, ranges[0],
                                                config_.data.shuffle, t.seed, m.vocab_size);
  if (ranges.size() > 1 && ranges[1].count > 0) {
    valid_sampler_ = std::make_unique<GptSampler>(*dataset_, m.seq_length, ranges[1], false,
                                                  t.seed, m.vocab_size);
  }
  SyntheticEntropy entropy;
  if (read_synthetic_metadata(config_.data.path, &entropy)) entropy_ = entropy;
  sample_buffer_.resize(static_cast<size_t>(m.seq_length + 1));

  params_ = model::GptParams::allocate(allocator_, m, runtime::MemoryCategory::param);
  model::init_params(params_, m, t.seed);
  grads_ = model::GptParams::allocate(allocator_, m, runtime::MemoryCategory::grad);
  grads_.flat.zero_();
  optimizer_ = std::make_unique<AdamW>(params_, allocator_);

  const auto chunks = parallel::stage_layer_chunks(config_.parallel, m.num_layers);
  recompute::RecomputePlan plan = recompute::resolve_plan(
      config_.recompute, groups_.coordinates.pp, chunks[static_cast<size_t>(groups_.coordinates.pp)]);
  const model::LayerDims dims = recompute::layer_dims(m, t.micro_batch_size, true);
  predicted_ = recompute::predict_activation_memory(m, dims, plan, 1);
  const std::string plan_text = describe_plan(plan);
  chunk_ = std::make_unique<recompute::ChunkExecutor>(m, params_, grads_, std::move(plan),
                                                      t.micro_batch_size, allocator_);
  const int64_t forward = m.num_layers * model::layer_forward_flops(dims).total() +
                          model::head_forward_flops(dims, m.padded_vocab());
  model_flops_per_step_ = 3 * forward * num_microbatches_;
  peak_gflops_ = measure_sgemm_gflops();

  if (groups_.is_logging_rank()) {
    metrics_ = std::make_unique<MetricsWriter>(config_.output.dir + "/metrics.jsonl");
    std::ofstream(config_.output.dir + "/config.yaml") << to_yaml(config_);
    log_ << "model: " << m.num_layers << " layers, hidden " << m.hidden_size << ", heads "
         << m.num_attention_heads << ", seq " << m.seq_length << ", vocab " << m.vocab_size
         << " (padded " << m.padded_vocab() << "), " << model::GptParams::count(m)
         << " parameters\n";
    log_ << "data: " << config_.data.path << " (" << dataset_->num_tokens() << " tokens; "
         << ranges[0].count << " train samples"
         << (valid_sampler_ ? ", " + std::to_string(ranges[1].count) + " validation" : "")
         << ")\n";
    log_ << "batch: global " << t.global_batch_size << " = micro " << t.micro_batch_size << " x "
         << num_microbatches_ << " microbatches x dp " << dp << "; "
         << t.global_batch_size * m.seq_length << " tokens per step\n";
    log_ << "recompute: " << plan_text << "; activation memory (predicted peak) "
         << format_bytes(predicted_.peak) << "\n";
    log_ << "peak for MFU: " << format("%.1f", peak_gflops_)
         << " GFLOP/s (OpenBLAS sgemm measured on this machine)\n";
    if (entropy_) {
      log_ << "data entropy floor: " << format("%.4f", entropy_->loss_floor(m.seq_length))
           << " nats/token for seq_length " << m.seq_length << " (entropy rate "
           << format("%.4f", entropy_->rate) << ")\n";
    }
    log_.flush();
  }
}

Trainer::~Trainer() = default;

recompute::Microbatch Trainer::make_microbatch(const GptSampler& sampler, int64_t first_sample,
                                               int64_t sample_offset) {
  const int64_t T = config_.model.seq_length, B = config_.train.micro_batch_size;
  recompute::Microbatch batch;
  batch.tokens = runtime::Tensor::empty(allocator_, {T, B}, runtime::DType::i32,
                                        runtime::MemoryCategory::activation);
  batch.targets = runtime::Tensor::empty(allocator_, {T, B}, runtime::DType::i32,
                                         runtime::MemoryCategory::activation);
  batch.sample_offset = sample_offset;
  int32_t* tokens = batch.tokens.i32();
  int32_t* targets = batch.targets.i32();
  for (int64_t b = 0; b < B; ++b) {
    sampler.sample(first_sample + b, sample_buffer_.data());
    for (int64_t t = 0; t < T; ++t) {
      tokens[t * B + b] = sample_buffer_[static_cast<size_t>(t)];
      targets[t * B + b] = sample_buffer_[static_cast<size_t>(t + 1)];
    }
  }
  return batch;
}

StepMetrics Trainer::train_step() {
  const auto start = Clock::now();
  const TrainConfig& t = config_.train;
  const int64_t B = t.micro_batch_size, G = t.global_batch_size, T = config_.model.seq_length;
  const int64_t dp = config_.parallel.data, dp_rank = groups_.coordinates.dp;
  const int64_t step = step_ + 1;
  allocator_.reset_peaks();
  chunk_->reset_recompute_flops();
  grads_.flat.zero_();

  // Microbatch mb on dp rank r holds global-batch samples [mb*B*dp + r*B, +B) (Megatron order).
  const float loss_scale = 1.0f / static_cast<float>((G / dp) * T);
  const recompute::StepInfo info{t.seed, step};
  auto microbatch = [&](int64_t mb) {
    const int64_t offset = mb * B * dp + dp_rank * B;
    return make_microbatch(*train_sampler_, step_ * G + offset, offset);
  };
  double loss_sum = parallel::run_no_pipeline(*chunk_, num_microbatches_, microbatch, info, loss_scale);
  groups_.dp->all_reduce_sum(&loss_sum, 1);
  parallel::average_gradients_over_dp(groups_, grads_.flat.f32(), grads_.flat.numel());

  StepMetrics m;
  m.step = step;
  m.loss = loss_sum / static_cast<double>(G * T);
  m.grad_norm = global_grad_norm(grads_);
  if (!std::isfinite(m.loss) || !std::isfinite(m.grad_norm)) {
    throw runtime::Error(TRAINER_STR("[rank " << groups_.world_rank << "] step " << step
                                              << ": non-finite loss " << m.loss
                                              << " or gradient norm " << m.grad_norm));
  }
  clip_gradients(grads_, m.grad_norm, config_.optimizer.clip_grad);
  m.lr = learning_rate(config_.optimizer, t.steps, step);
  optimizer_->step(params_, grads_, config_.optimizer, m.lr, step);
  step_ = step;

  const double seconds = seconds_since(start);
  m.step_ms = seconds * 1e3;
  m.tokens_per_s = static_cast<double>(G * T) / seconds;
  m.recompute_flops = chunk_->recompute_flops();
  m.model_tflops = static_cast<double>(model_flops_per_step_) / seconds / 1e12;
  m.hardware_tflops = static_cast<double>(model_flops_per_step_ + m.recompute_flops) / seconds / 1e12;
  m.predicted_activation_peak = predicted_.peak;
  m.memory = allocator_.stats();
  return m;
}

double Trainer::evaluate() {
  TRAINER_ASSERT(valid_sampler_ != nullptr, "evaluate() without a validation split");
  const TrainConfig& t = config_.train;
  const int64_t B = t.micro_batch_size, G = t.global_batch_size, T = config_.model.seq_length;
  const int64_t dp = config_.parallel.data, dp_rank = groups_.coordinates.dp;
  double loss_sum = 0;
  for (int64_t batch = 0; batch < t.eval_iters; ++batch) {
    for (int64_t mb = 0; mb < num_microbatches_; ++mb) {
      const int64_t offset = mb * B * dp + dp_rank * B;
      loss_sum += chunk_->evaluate(make_microbatch(*valid_sampler_, batch * G + offset, offset));
    }
  }
  groups_.dp->all_reduce_sum(&loss_sum, 1);
  return loss_sum / static_cast<double>(t.eval_iters * G * T);
}

void Trainer::log_step(const StepMetrics& m) {
  char line[512];
  std::snprintf(line, sizeof line,
                "step %5lld/%lld | loss %.4f | lr %.3e | grad norm %.3f | %8.0f tok/s | %7.1f ms"
                " | MFU %4.1f%% HFU %4.1f%% | act peak %s",
                static_cast<long long>(m.step), static_cast<long long>(config_.train.steps),
                m.loss, m.lr, m.grad_norm, m.tokens_per_s, m.step_ms,
                100.0 * m.model_tflops * 1e3 / peak_gflops_,
                100.0 * m.hardware_tflops * 1e3 / peak_gflops_,
                format_bytes(m.memory[runtime::MemoryCategory::activation].peak).c_str());
  log_ << line;
  if (m.val_loss) log_ << format(" | val loss %.4f", *m.val_loss);
  log_ << "\n";
  log_.flush();
}

TrainSummary Trainer::run() {
  const TrainConfig& t = config_.train;
  const auto start = Clock::now();
  TrainSummary summary;
  summary.steps = t.steps;
  if (entropy_) summary.loss_floor = entropy_->loss_floor(config_.model.seq_length);
  const bool logging = groups_.is_logging_rank();
  while (step_ < t.steps) {
    StepMetrics m = train_step();
    const bool last = step_ == t.steps;
    if (valid_sampler_ && t.eval_interval > 0 && (step_ % t.eval_interval == 0 || last)) {
      m.val_loss = evaluate();
      summary.last_val_loss = m.val_loss;
    }
    if (step_ == 1) summary.first_loss = m.loss;
    summary.last_loss = m.loss;
    if (logging) {
      metrics_->write(m);
      if (step_ % t.log_interval == 0 || last || step_ == 1 || m.val_loss) log_step(m);
    }
  }
  summary.seconds = seconds_since(start);
  summary.tokens_per_s = static_cast<double>(t.steps * t.global_batch_size *
                                             config_.model.seq_length) /
                         std::max(summary.seconds, 1e-9);
  if (logging && config_.output.export_model) {
    export_hf_gpt2(config_.output.dir, params_, config_.model);
  }
  if (logging) {
    log_ << "done: " << t.steps << " steps in " << format("%.1f", summary.seconds) << " s ("
         << format("%.0f", summary.tokens_per_s) << " tok/s)";
    if (t.steps > 0) {
      log_ << "; loss " << format("%.4f", summary.first_loss) << " -> "
           << format("%.4f", summary.last_loss);
    }
    if (summary.last_val_loss) log_ << "; val loss " << format("%.4f", *summary.last_val_loss);
    if (summary.loss_floor) {
      log_ << "; floor " << format("%.4f", *summary.loss_floor);
      if (summary.last_val_loss) {
        log_ << " (gap " << format("%.4f", *summary.last_val_loss - *summary.loss_floor) << ")";
      }
    }
    log_ << "\n";
    if (config_.output.export_model) {
      log_ << "wrote " << config_.output.dir << "/model.safetensors and config.json\n";
    }
    log_.flush();
  }
  return summary;
}

}  // namespace trainer
