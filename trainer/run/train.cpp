// Training loop. Rules: gradients are zeroed at the start of each step and
// accumulate over its microbatches; the loss logged for step s is the mean token
// loss of the batch step s trained on, computed before its update.
#include "trainer/run/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "parallel/pipeline/gather_params.h"
#include "parallel/pipeline/grad_sync.h"
#include "parallel/pipeline/schedules.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"
#include "runtime/trace.h"
#include "trainer/engine/lr_schedule.h"
#include "trainer/export/hf_export.h"
#include "trainer/observe/mfu_peak.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/run/gathered_export.h"
#include "trainer/run/stop_signals.h"
#include "trainer/util/format_bytes.h"

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

void check_supported(const Config& c) {
  if (c.train.device != Device::cuda) return;
#ifndef TRAINER_WITH_CUDA
  throw runtime::ConfigError("train.device", "cuda, but this trainer was built without CUDA");
#endif
}

parallel::CommBackend resolve_comm_backend(const Config& config, int64_t world_size,
                                           int64_t distinct_gpus) {
  const parallel::CommBackend asked = config.parallel.backend;
  if (config.train.device != Device::cuda || world_size == 1) return parallel::CommBackend::mpi;
  const bool own_gpu = distinct_gpus == world_size;
  if (asked == parallel::CommBackend::nccl && !own_gpu) {
    throw runtime::ConfigError("parallel.backend",
                               "nccl needs a GPU per rank, but the " + std::to_string(world_size) +
                                   " ranks share " + std::to_string(distinct_gpus) +
                                   " GPUs; use backend auto or mpi");
  }
  if (asked == parallel::CommBackend::automatic) {
    return own_gpu ? parallel::CommBackend::nccl : parallel::CommBackend::mpi;
  }
  return asked;
}

Trainer::Trainer(const RunPlan& plan, parallel::ProcessGroups& groups,
                 runtime::Allocator& allocator, std::ostream& log)
    : timing_(plan.timing),
      config_(plan.config),
      groups_(groups),
      allocator_(allocator),
      log_(log),
      predicted_comm_(plan.memory.comm_payload_bytes +
                      rank_metrics_payload_bytes(groups.world_size())),
      predicted_memory_(plan.memory),
      recorder_(config_, groups, allocator, log),
      skipped_(config_.data.skip_batches),
      guard_(config_.train.guard),
      gate_(config_.targets),
      drift_(config_.targets),
      on_device_(allocator.device() != runtime::DeviceKind::cpu),
      predicted_step_ms_(plan.step ? plan.step->step_s * 1e3 : 0.0) {
  // check_supported (this build can reach train.device) is the launcher's: the Trainer runs
  // on whatever allocator it is given (tests emulate a device on the host).
  create_output_dir();
  open_datasets();
  // The whole model on rank 0's host for a sample: gathered from the ranks, or copied from the
  // device.
  const bool host_copy = groups_.world_size() > 1 || on_device_;
  samples_.emplace(config_, groups_.world_rank,
                   host_copy
                       ? std::optional<int64_t>(model::GptParams::count(whole_model_config()) *
                                                static_cast<int64_t>(sizeof(float)))
                       : std::nullopt);
  build_rank_state(state_, config_, groups_, allocator_, [this](RankState&) { init_weights(); });
  peak_ = mfu_peak();
  if (groups_.is_logging_rank()) {
    log_plan(plan);
    start_logging();
  }
}

void Trainer::log_plan(const RunPlan& plan) {
  // A profile matches a run that masks documents only when it was timed with them (Note [Timed
  // documents] in planning/calibrate.cpp; one that does not match says why in the source); the
  // roofline knows no documents.
  const char* documents = "";
  if (plan.timed_with_documents) {
    documents = "; attention timed with the documents of the run's first microbatches";
  } else if (config_.data.reset_attention_mask && !timing_.profile) {
    documents = "; attention timed without the documents' mask, which flash runs faster";
  }
  log_ << "predicted step: " << format("%.1f", predicted_step_ms_) << " ms, "
       << format("%.0f", plan.step->tokens_per_s) << " tok/s (time from " << plan.step->source
       << documents << ")\n";
  if (timing_.calibrated_here) {
    const std::string path = run_profile_path(config_);
    write_time_profile(*timing_.profile, path);
    log_ << "time profile calibrated at startup: " << path << "\n";
  }
  if (plan.recompute_auto) {
    log_ << "recompute.auto: planned under train.memory_budget_gib "
         << config_.train.memory_budget_gib << " (trainer plan prints the plan)\n";
    for (const std::string& proof : stage_proof_lines(timing_.stage_proof))
      log_ << "recompute.auto: " << proof << "\n";
  }
}

void Trainer::create_output_dir() {
  std::error_code error;
  std::filesystem::create_directories(config_.output.dir, error);
  if (error) {
    throw runtime::ConfigError("output.dir",
                               "cannot create '" + config_.output.dir + "': " + error.message());
  }
}

void Trainer::open_datasets() {
  data_ = std::make_unique<TrainingData>(config_);
  sample_buffer_.resize(static_cast<size_t>(config_.model.seq_length + 1));
  start_buffer_.resize(static_cast<size_t>(config_.model.seq_length));
}

void Trainer::init_weights() {
  if (on_device_) {  // the host copy serves checkpoints and exports; init runs on the device
    host_params_ = model::GptParams::allocate(host_allocator_, config_.model, state_.setup.shard,
                                              runtime::MemoryCategory::comm);
  }
  model::init_params(state_.master, config_.model, config_.train.seed);
  refresh_compute_weights();
}

PeakRate Trainer::mfu_peak() const {
  if (timing_.profile)
    return {timing_.profile->gemm_gflops,
            "the GEMM rate of the time profile (" + timing_.origin + ")"};
  if (!on_device_) return cpu_mfu_peak();
  const TrainConfig& t = config_.train;
  if (t.peak_tflops > 0) return {t.peak_tflops * 1e3, "train.peak_tflops"};
  return {(uses_bf16(t) ? kBf16PeakTflops : kFp32PeakTflops) * 1e3,
          "H100/H200 dense peak for the precision; train.peak_tflops sets another"};
}

void Trainer::keep_peak_above(const StepMetrics& m) {
  const double achieved_gflops = m.hardware_tflops * 1e3;  // HFU's numerator >= MFU's
  if (on_device_ || achieved_gflops <= peak_.gflops) return;
  const PeakRate measured = cpu_mfu_peak();
  peak_ = {std::max(measured.gflops, achieved_gflops),
           measured.gflops >= achieved_gflops
               ? measured.source + ", again at step " + std::to_string(m.step) +
                     " (the step beat the peak)"
               : "the rate of step " + std::to_string(m.step) + " (above every peak measured)"};
  log_ << "peak for MFU raised to " << format("%.1f", peak_.gflops) << " GFLOP/s (" << peak_.source
       << ")\n";
}

void Trainer::start_logging() {
  const model::GptConfig& m = config_.model;
  const TrainConfig& t = config_.train;
  const parallel::ParallelConfig& pc = config_.parallel;
  std::ofstream(config_.output.dir + "/config.yaml") << to_yaml(config_);
  const bool llama = m.architecture == model::Architecture::llama;
  log_ << "model: " << (llama ? "llama, " : "") << m.num_layers << " layers, hidden "
       << m.hidden_size << ", heads " << m.num_attention_heads
       << (m.kv_channels > 0 ? " of " + std::to_string(m.kv_channels) : std::string())
       << (llama ? " (" + std::to_string(m.query_groups()) + " kv), ffn " +
                       std::to_string(m.ffn()) + ", rope base " + format("%g", m.rotary_base) +
                       (m.rope_scaling.enabled()
                            ? std::string(m.rope_scaling.type == runtime::RopeScalingType::yarn
                                              ? " scaled by YaRN x"
                                              : " scaled as Llama 3.1 x") +
                                  format("%g", m.rope_scaling.factor)
                            : std::string()) +
                       (m.add_qkv_bias ? ", q/k/v biases" : "") +
                       (m.qk_layernorm ? ", q/k norms" : "") +
                       (m.untie_embeddings ? "" : ", tied head")
                 : std::string())
       << ", seq " << m.seq_length << ", vocab " << m.vocab_size << " (padded "
       << m.padded_vocab(pc.tensor) << "), " << model::GptParams::count(m) << " parameters, "
       << model::attention_backend_name(m.attention_backend) << " attention"
       << (m.sliding_window > 0 ? " in a sliding window of " + std::to_string(m.sliding_window)
                                : std::string())
       << "\n";
  data_->describe(log_, config_.data);
  log_ << "batch: global " << t.global_batch_size << " = micro " << t.micro_batch_size << " x "
       << state_.setup.num_microbatches << " microbatches x dp " << pc.data << "; "
       << t.global_batch_size * m.seq_length << " tokens per step\n";
  log_ << "parallel: tensor " << pc.tensor
       << (pc.sequence_parallel && pc.tensor > 1 ? " (sequence parallel)" : "") << ", pipeline "
       << pc.pipeline
       << (pc.virtual_pipeline > 1 ? " x " + std::to_string(pc.virtual_pipeline) + " virtual" : "")
       << ", context " << pc.context << ", data " << pc.data << "\n";
  log_ << "recompute (stage 0): " << describe_plan(state_.setup.plan)
       << "; activation memory (predicted peak, rank 0) "
       << format_bytes(state_.setup.predicted_activation_peak) << "\n";
  log_ << "peak for MFU: " << format("%.1f", peak_.gflops) << " GFLOP/s (" << peak_.source << ")\n";
  if (const std::optional<SyntheticEntropy>& entropy = data_->entropy()) {
    log_ << "data entropy floor: " << format("%.4f", entropy->loss_floor(m.seq_length))
         << " nats/token for seq_length " << m.seq_length << " (entropy rate "
         << format("%.4f", entropy->rate) << ")\n";
  }
  log_.flush();
}

Trainer::~Trainer() = default;

void Trainer::refresh_compute_weights() {
  if (has_master_copy()) runtime::ops::convert(state_.params.flat, state_.master.flat);
}

std::string Trainer::first_nonfinite_gradient() const {
  for (const model::NamedParam& p : state_.grads.named) {
    // A NaN or an infinity anywhere makes the sum of squares non-finite (host or device).
    if (!std::isfinite(runtime::ops::sum_squares({.x = p.tensor, .count = p.tensor.numel()})))
      return p.name;
  }
  return "";
}

recompute::Microbatch Trainer::make_microbatch(const SampleSource& sampler, int64_t batch,
                                               int64_t mb, const recompute::ChunkExecutor& chunk) {
  const TrainConfig& t = config_.train;
  MicrobatchIds ids =
      allocate_microbatch_ids(config_, state_.setup, chunk.chunk(), allocator_, on_device_);
  recompute::Microbatch& micro = ids.micro;
  const int64_t T = ids.T, B = ids.B;
  // Microbatch mb on dp rank r holds global-batch samples [mb*B*dp + r*B, +B) (Megatron order).
  micro.sample_offset = mb * B * config_.parallel.data + groups_.coordinates.dp * B;
  if (ids.rows.count == 0) return micro;
  // This rank's rows of the sequence (all of it without context parallelism).
  const parallel::ContextShard shard = state_.setup.dims.context();
  const std::optional<int32_t> masked = data_->masked_input(), eod = data_->document_end();
  // Filled on the host: into the tensors themselves on a host run; on a device into one
  // staging tensor (one row each: tokens, targets, document starts), uploaded in one transfer,
  // then copied into the tensors of their own (their lifetimes differ).
  runtime::Tensor staging;
  if (on_device_) {
    staging = runtime::Tensor::empty(host_allocator_, ids.uploaded.shape(), runtime::DType::i32,
                                     runtime::MemoryCategory::workspace);
  }
  auto host_row = [&](int64_t row, const runtime::Tensor& own) -> int32_t* {
    if (row < 0) return nullptr;
    return on_device_ ? staging.i32() + row * T * B : own.i32();
  };
  int32_t* host_tokens = host_row(ids.rows.tokens, micro.tokens);
  int32_t* host_targets = host_row(ids.rows.targets, micro.targets);
  int32_t* host_starts = host_row(ids.rows.starts, ids.starts);
  const std::span<const int32_t> inputs(sample_buffer_.data(), sample_buffer_.size() - 1);
  for (int64_t b = 0; b < B; ++b) {
    sampler.sample(batch * t.global_batch_size + micro.sample_offset + b, sample_buffer_.data());
    if (host_starts != nullptr) document_starts(inputs, *eod, start_buffer_);
    for (int64_t i = 0; i < T; ++i) {  // local row i is position shard.position(i)
      const auto position = static_cast<size_t>(shard.position(i));
      if (host_tokens != nullptr) host_tokens[i * B + b] = sample_buffer_[position];
      if (host_targets != nullptr) {
        host_targets[i * B + b] = masked && sample_buffer_[position] == *masked
                                      ? runtime::kIgnoredTarget
                                      : sample_buffer_[position + 1];
      }
      if (host_starts != nullptr) host_starts[i * B + b] = start_buffer_[position];
    }
  }
  if (!on_device_) return micro;
  runtime::ops::upload(ids.uploaded, staging);
  auto copy_row = [&](int64_t row, const runtime::Tensor& own) {
    if (row >= 0) runtime::ops::copy(own, ids.uploaded.view(row * T * B, {T, B}));
  };
  copy_row(ids.rows.tokens, micro.tokens);
  copy_row(ids.rows.targets, micro.targets);
  copy_row(ids.rows.starts, ids.starts);
  return micro;
}

int64_t Trainer::batch_targets(const SampleSource& sampler, int64_t batch) const {
  const int64_t G = config_.train.global_batch_size;
  return counted_targets(sampler, batch * G, G, config_.model.seq_length, data_->masked_input());
}

parallel::PipelineStep Trainer::pipeline_step(const SampleSource& sampler, int64_t batch,
                                              int64_t step, int64_t counted) {
  return make_pipeline_step(
      state_, groups_, config_, step,
      [this, &sampler, batch](int64_t mb, int64_t chunk) {
        return make_microbatch(sampler, batch, mb, *state_.chunks[static_cast<size_t>(chunk)]);
      },
      data_->masked_input() ? counted : 0);
}

StepMetrics Trainer::train_step() {
  const auto start = Clock::now();
  const TrainConfig& t = config_.train;
  const int64_t G = t.global_batch_size, T = config_.model.seq_length;
  const int64_t step = step_ + 1;
  const runtime::trace::Scope trace({.name = "step", .step = step});
  ++steps_run_;
  allocator_.reset_peaks();
  const int64_t comm_before = groups_.payload_bytes();
  for (const auto& chunk : state_.chunks) chunk->reset_recompute_flops();

  const int64_t batch = skipped_.batch_of_step(step);
  // Every rank counts the whole batch's targets from the data (no collective).
  const int64_t counted = std::max<int64_t>(batch_targets(data_->train(), batch), 1);
  auto [loss_sum, reduce_time] = compute_step_gradients(
      state_, groups_, config_, pipeline_step(data_->train(), batch, step, counted));
  inject_fault(batch, loss_sum);

  StepMetrics m;
  m.step = step;
  m.grad_reduce_wait_ms = reduce_time.after_backward_s * 1e3;
  m.grad_reduce_in_backward_ms = reduce_time.in_backward_s * 1e3;
  m.loss = loss_sum / static_cast<double>(counted);
  m.grad_norm = state_.optimizer->grad_norm(groups_, state_.grads, state_.setup.shard.embedding);
  m.lr = learning_rate(config_.optimizer, t.steps, step);
  if (!guard_step(m)) {
    m.update_skipped = true;
    step_ = step;  // the batch is consumed; the weights stay
    m.step_ms = seconds_since(start) * 1e3;
    m.memory = allocator_.stats();
    return m;
  }
  apply_update(state_, groups_, config_, m.grad_norm, m.lr, step);
  step_ = step;
  runtime::ops::synchronize(state_.params.flat);  // device ops are asynchronous: time finished work

  const double seconds = seconds_since(start);
  m.step_ms = seconds * 1e3;
  m.predicted_step_ms = predicted_step_ms_;
  m.tokens_per_s = static_cast<double>(G * T) / seconds;
  for (const auto& chunk : state_.chunks) m.recompute_flops += chunk->recompute_flops();
  const int64_t model_flops = state_.setup.model_flops_per_step;
  m.model_tflops = static_cast<double>(model_flops) / seconds / 1e12;
  m.hardware_tflops = static_cast<double>(model_flops + m.recompute_flops) / seconds / 1e12;
  keep_peak_above(m);
  m.mfu_percent = percent_of_peak(m.model_tflops, peak_.gflops);
  m.hfu_percent = percent_of_peak(m.hardware_tflops, peak_.gflops);
  m.recompute_share =
      model_flops > 0 ? static_cast<double>(m.recompute_flops) / static_cast<double>(model_flops)
                      : 0.0;
  m.predicted_activation_peak = state_.setup.predicted_activation_peak;
  m.predicted_memory = predicted_memory_.peak;
  m.memory = allocator_.stats();
  m.predicted_comm_bytes = predicted_comm_;
  if (groups_.world_size() > 1) gather_rank_numbers(m, groups_.payload_bytes() - comm_before);
  m.comm_bytes = groups_.payload_bytes() - comm_before;
  return m;
}

void Trainer::inject_fault(int64_t batch, double& loss_sum) {
  const InjectConfig& inject = config_.train.inject;
  if (inject.step == 0 || batch != inject.step - 1) return;
  loss_sum *= inject.scale_loss;
  runtime::ops::scale_inplace({.x = state_.grads.flat,
                               .count = state_.grads.flat.numel(),
                               .scale = static_cast<float>(inject.scale_loss)});
}

void Trainer::gather_rank_numbers(StepMetrics& m, int64_t comm_bytes) {
  // Each rank fills its slots, one sum. (Counted in the step's comm bytes: the doubles of this
  // very sum.)
  const int64_t n = groups_.world_size(), r = groups_.world_rank;
  auto slot = [n](int64_t column, int64_t rank) { return static_cast<size_t>(column * n + rank); };
  std::vector<double> slots(static_cast<size_t>(kRankMetricColumns * n), 0.0);
  int64_t total = 0, predicted_total = 0;
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    total += m.memory[c].peak;
    predicted_total += m.predicted_memory[static_cast<size_t>(c)];
  }
  const std::array<int64_t, kRankMetricColumns> mine = {
      m.memory[runtime::MemoryCategory::activation].peak,
      m.predicted_activation_peak,
      comm_bytes + rank_metrics_payload_bytes(n),
      predicted_comm_,
      total,
      predicted_total};
  for (int64_t column = 0; column < kRankMetricColumns; ++column)
    slots[slot(column, r)] = static_cast<double>(mine[static_cast<size_t>(column)]);
  groups_.world->all_reduce_sum(slots.data(), kRankMetricColumns * n);
  std::array<std::vector<int64_t>*, kRankMetricColumns> lists = {
      &m.rank_activation_peak,      &m.rank_predicted_peak, &m.rank_comm_bytes,
      &m.rank_predicted_comm_bytes, &m.rank_total_peak,     &m.rank_predicted_total_peak};
  for (int64_t column = 0; column < kRankMetricColumns; ++column)
    for (int64_t i = 0; i < n; ++i)
      lists[static_cast<size_t>(column)]->push_back(static_cast<int64_t>(slots[slot(column, i)]));
}

ValidationLosses Trainer::evaluate_datasets() {
  TRAINER_ASSERT(data_->has_validation(), "evaluate() without a validation split");
  const TrainConfig& t = config_.train;
  ValidationLosses losses;
  for (const DataSource& source : data_->sources()) {
    double loss_sum = 0;
    int64_t counted = 0;
    for (int64_t batch = 0; batch < t.eval_iters; ++batch) {
      const int64_t targets = batch_targets(*source.validation, batch);
      counted += targets;
      loss_sum += parallel::run_evaluation(pipeline_step(*source.validation, batch, 0, targets));
    }
    all_reduce_step_loss(groups_, loss_sum);
    const double loss = loss_sum / static_cast<double>(std::max<int64_t>(counted, 1));
    losses.per_dataset.push_back(loss);
    losses.overall += source.weight * loss;
  }
  return losses;
}

void Trainer::write_sample() {
  std::unique_ptr<model::GptParams> gathered;
  if (groups_.world_size() > 1) gathered = gather(host_params());  // collective
  if (groups_.world_rank != 0) return;
  record_event(samples_->write(gathered ? *gathered : host_params(),
                               gathered ? whole_model_config() : config_.model, step_, log_));
}

model::GptConfig Trainer::whole_model_config() const {
  model::GptConfig padded = config_.model;
  padded.make_vocab_size_divisible_by *= config_.parallel.tensor;
  return padded;
}

const model::GptParams& Trainer::host_params() {
  if (!on_device_) return state_.master;
  const runtime::Tensor master = state_.master.flat.defined()
                                     ? state_.master.flat
                                     : state_.optimizer->full_state(*groups_.dp, allocator_).master;
  runtime::ops::download(host_params_.flat, master);
  return host_params_;
}

std::unique_ptr<model::GptParams> Trainer::gather(const model::GptParams& local) {
  if (local.flat.device() != runtime::DeviceKind::cpu) {  // gathered from a host copy
    const model::GptParams host = model::GptParams::allocate(
        host_allocator_, config_.model, state_.setup.shard, runtime::MemoryCategory::comm);
    runtime::ops::download(host.flat, local.flat);
    return gather(host);
  }
  std::unique_ptr<model::GptParams> full;
  const model::GptConfig padded = whole_model_config();
  if (groups_.world_rank == 0) {
    if (!gather_allocator_) gather_allocator_ = std::make_unique<runtime::CpuAllocator>();
    full = std::make_unique<model::GptParams>(
        model::GptParams::allocate(*gather_allocator_, padded, runtime::MemoryCategory::comm));
  }
  parallel::gather_to_rank0(groups_, padded, local, full.get());
  return full;
}

void Trainer::log_step(const StepMetrics& m, double seconds_per_step) {
  char line[512];
  std::snprintf(line, sizeof line,
                "step %5lld/%lld | loss %.4f | lr %.3e | grad norm %.3f | %8.0f tok/s | %7.1f ms"
                " | MFU %4.1f%% HFU %4.1f%% | act peak %s",
                static_cast<long long>(m.step), static_cast<long long>(config_.train.steps), m.loss,
                m.lr, m.grad_norm, m.tokens_per_s, m.step_ms, m.mfu_percent, m.hfu_percent,
                format_bytes(m.memory[runtime::MemoryCategory::activation].peak).c_str());
  log_ << line;
  const int64_t measured = m.memory[runtime::MemoryCategory::activation].peak;
  if (measured != m.predicted_activation_peak) {
    log_ << " (predicted " << format_bytes(m.predicted_activation_peak) << ")";
  }
  if (m.val_loss) log_ << format(" | val loss %.4f", *m.val_loss);
  for (size_t k = 0; k < m.dataset_val_losses.size(); ++k) {
    log_ << (k == 0 ? " (" : ", ") << m.dataset_val_losses[k].first
         << format(" %.4f", m.dataset_val_losses[k].second)
         << (k + 1 == m.dataset_val_losses.size() ? ")" : "");
  }
  const int64_t remaining = config_.train.steps - m.step;
  if (remaining > 0 && seconds_per_step > 0) {
    const auto eta = static_cast<int64_t>(static_cast<double>(remaining) * seconds_per_step);
    log_ << " | eta " << eta / 60 << "m" << (eta % 60 < 10 ? "0" : "") << eta % 60 << "s";
  }
  log_ << "\n";
  log_.flush();
}

TrainSummary Trainer::run() {
  try {
    return run_steps();
  } catch (const std::exception& error) {
    try {  // the ledger's last line names the error; the error itself goes on
      record_event(Event("end", step_).with("reason", "error").with("message", error.what()));
    } catch (const std::exception&) {
    }
    throw;
  }
}

TrainSummary Trainer::run_steps() {
  const TrainConfig& t = config_.train;
  const auto start = Clock::now();
  const int64_t first_step = step_, first_run = steps_run_;
  TrainSummary summary;
  summary.steps = t.steps;
  if (data_->entropy()) summary.loss_floor = data_->entropy()->loss_floor(config_.model.seq_length);
  open_run_files();
  // A rewind needs a checkpoint written before the spike: the starting state's, at least.
  if (t.guard.action == GuardAction::rewind && !last_checkpoint_step_) save_checkpoint();
  const StopSignals signals;
  while (step_ < t.steps) {
    recorder_.begin_step(step_ + 1);
    StepMetrics m = train_step();
    recorder_.end_step(m.step);
    if (m.rewind && !rewind(m)) {
      return stop_run(
          summary, StopReason::diverged,
          TRAINER_STR("stopped by train.guard: a spike at step "
                      << m.step << " after " << rewinds_ << " rewinds (train.guard.max_rewinds "
                      << t.guard.max_rewinds << ")"));
    }
    if (m.rewind) continue;
    const bool last = step_ == t.steps;
    if (pending_save_ && pending_save_->poll(*groups_.world)) finish_checkpoints();
    // Every step's evaluation, sample and metrics row come before any stop and checkpoint, so
    // a planned stop keeps its step's row and a resume from the step's checkpoint never writes
    // it again (as Megatron's loop: the step's log and evaluation, then checkpoint and exit).
    const bool past_duration = t.exit_duration_minutes > 0 && !last &&
                               seconds_since(created_) >= 60.0 * t.exit_duration_minutes;
    const StopSignals::Stop asked = signals.stop_after_step(*groups_.world, past_duration);
    if (data_->has_validation() && t.eval_interval > 0 && (step_ % t.eval_interval == 0 || last)) {
      const ValidationLosses losses = evaluate_datasets();
      m.val_loss = losses.overall;
      const std::vector<DataSource>& sources = data_->sources();
      for (size_t k = 0; sources.size() > 1 && k < sources.size(); ++k)
        m.dataset_val_losses.push_back({sources[k].name, losses.per_dataset[k]});
      summary.last_val_loss = m.val_loss;
    }
    if (t.sample_interval > 0 && step_ % t.sample_interval == 0) write_sample();
    const bool first_of_process = steps_run_ == first_run + 1;
    if (first_of_process) summary.first_loss = m.loss;
    summary.last_loss = m.loss;
    const double seconds_per_step =
        seconds_since(start) / static_cast<double>(steps_run_ - first_run);
    const std::optional<std::string> missed =
        observe_step(m, first_of_process, seconds_per_step, asked != StopSignals::Stop::none);
    if (asked == StopSignals::Stop::signal) {
      record_event(Event("signal", step_));
      return stop_run(summary, StopReason::signal, "stopped by a signal");
    }
    if (asked == StopSignals::Stop::duration) {
      return stop_run(summary, StopReason::duration,
                      TRAINER_STR("stopped by train.exit_duration_minutes "
                                  << t.exit_duration_minutes << ": "
                                  << format("%.1f", seconds_since(created_) / 60.0)
                                  << " minutes since the trainer started"));
    }
    if (missed) return stop_run(summary, StopReason::target_missed, *missed);
    if (config_.checkpoint.interval > 0 && step_ % config_.checkpoint.interval == 0 && !last) {
      save_checkpoint();
    }
  }
  if (!config_.checkpoint.dir.empty() && step_ > first_step) save_checkpoint();
  finish_checkpoints();
  recorder_.write_trace(step_);  // a window cut short by the run's end
  summary.seconds = seconds_since(start);
  // Every step run counts, those a rewind ran again included.
  summary.tokens_per_s = static_cast<double>((steps_run_ - first_run) * t.global_batch_size *
                                             config_.model.seq_length) /
                         std::max(summary.seconds, 1e-9);
  if (config_.output.export_model) {
    // GPT-2 blocks as GPT2LMHeadModel, Llama blocks as LlamaForCausalLM.
    const runtime::DType dtype = config_.output.export_dtype;
    if (groups_.world_size() == 1) {
      export_hf(config_.output.dir, host_params(), config_.model, dtype);
    } else {
      export_hf_gathered(config_.output.dir, groups_, host_params(), whole_model_config(), dtype);
    }
  }
  record_event(Event("end", step_)
                   .with("reason", std::string(to_string(StopReason::completed)))
                   .with("loss", summary.last_loss)
                   .with("seconds", summary.seconds));
  if (groups_.is_logging_rank()) log_summary(summary, first_step);
  return summary;
}

void Trainer::log_summary(const TrainSummary& summary, int64_t first_step) {
  const TrainConfig& t = config_.train;
  log_ << "done: " << t.steps - first_step << " steps in " << format("%.1f", summary.seconds)
       << " s (" << format("%.0f", summary.tokens_per_s) << " tok/s)";
  if (t.steps > first_step) {
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

}  // namespace trainer
