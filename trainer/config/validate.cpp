// Cross-field rules of the run config, checked before anything is allocated.
// Each failure is a ConfigError at the field's YAML path whose message names
// every field involved and its value. Ranges come first so later rules never divide by 0.
#include <cmath>
#include <limits>
#include <optional>

#include "runtime/op_types.h"
#include "trainer/config/config.h"
#include "trainer/config/fields.h"

namespace trainer {
namespace {

using config_detail::format_number;
using runtime::ConfigError;

std::string text_of(int64_t value) {
  return std::to_string(value);
}
std::string text_of(float value) {
  return format_number(value);
}
std::string text_of(double value) {
  return format_number(value);
}

template <class Number>
void check_at_least(const std::string& path, Number value, Number minimum) {
  if (!(value >= minimum)) {
    throw ConfigError(path, "must be >= " + text_of(minimum) + ", got " + text_of(value));
  }
}

void check_positive(const std::string& path, float value) {
  if (!(value > 0 && std::isfinite(value))) {
    throw ConfigError(path, "must be finite and > 0, got " + text_of(value));
  }
}

void check_non_negative(const std::string& path, float value) {
  if (!(value >= 0 && std::isfinite(value))) {
    throw ConfigError(path, "must be finite and >= 0, got " + text_of(value));
  }
}

// [0, 1): dropout probabilities and Adam betas.
void check_unit_interval(const std::string& path, float value) {
  if (!(value >= 0 && value < 1)) {
    throw ConfigError(path, "must be in [0, 1), got " + text_of(value));
  }
}

// a * b, or nullopt when it overflows int64 (then no smaller value is divisible by it).
std::optional<int64_t> product(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

bool divisible(int64_t value, std::optional<int64_t> divisor) {
  return divisor.has_value() && value % *divisor == 0;
}

std::string text_of(std::optional<int64_t> value) {
  return value ? text_of(*value) : std::string("(overflows int64)");
}

// model.rope_scaling: off (factor 0), or Llama 3.1's or YaRN's scaling of rotary frequencies.
void validate_rope_scaling(const model::GptConfig& model) {
  const runtime::RopeScaling& s = model.rope_scaling;
  if (!s.enabled()) return;
  if (model.learned_positions()) {
    throw ConfigError("model.rope_scaling.factor",
                      text_of(s.factor) +
                          " scales rotary positions, but model.position_embedding "
                          "is learned (set factor 0, or position_embedding rope)");
  }
  if (!(std::isfinite(s.factor) && s.factor >= 1.f)) {
    throw ConfigError("model.rope_scaling.factor",
                      "must be 0 (off) or finite and >= 1, got " + text_of(s.factor));
  }
  check_at_least<int64_t>("model.rope_scaling.original_max_position_embeddings",
                          s.original_max_position_embeddings, 1);
  if (s.type == runtime::RopeScalingType::yarn) {
    check_positive("model.rope_scaling.beta_slow", s.beta_slow);
    if (!(std::isfinite(s.beta_fast) && s.beta_fast > s.beta_slow)) {
      throw ConfigError("model.rope_scaling.beta_fast",
                        "must be finite and above model.rope_scaling.beta_slow " +
                            text_of(s.beta_slow) + ", got " + text_of(s.beta_fast));
    }
    return;
  }
  check_positive("model.rope_scaling.low_freq_factor", s.low_freq_factor);
  if (!(std::isfinite(s.high_freq_factor) && s.high_freq_factor > s.low_freq_factor)) {
    throw ConfigError("model.rope_scaling.high_freq_factor",
                      "must be finite and above model.rope_scaling.low_freq_factor " +
                          text_of(s.low_freq_factor) + ", got " + text_of(s.high_freq_factor));
  }
}

// Where the head dim comes from, for errors: "model.kv_channels 24", or "model.hidden_size 64 /
// model.num_attention_heads 4 = 16".
std::string head_dim_text(const model::GptConfig& model) {
  if (model.kv_channels > 0) return "model.kv_channels " + text_of(model.kv_channels);
  return "model.hidden_size " + text_of(model.hidden_size) + " / model.num_attention_heads " +
         text_of(model.num_attention_heads) + " = " + text_of(model.head_dim());
}

void validate_model(const model::GptConfig& model) {
  check_at_least<int64_t>("model.num_layers", model.num_layers, 1);
  check_at_least<int64_t>("model.hidden_size", model.hidden_size, 1);
  check_at_least<int64_t>("model.num_attention_heads", model.num_attention_heads, 1);
  check_at_least<int64_t>("model.kv_channels", model.kv_channels, 0);
  if (model.kv_channels == 0 && model.hidden_size % model.num_attention_heads != 0) {
    throw ConfigError("model.hidden_size", text_of(model.hidden_size) +
                                               " is not divisible by model.num_attention_heads " +
                                               text_of(model.num_attention_heads) +
                                               " (set model.kv_channels for another head width)");
  }
  if (!product(model.num_attention_heads, model.head_dim()) ||
      !product(model.hidden_size, model.attention_width())) {
    throw ConfigError("model.kv_channels", text_of(model.kv_channels) +
                                               " is too large for model.num_attention_heads " +
                                               text_of(model.num_attention_heads));
  }
  check_at_least<int64_t>("model.num_query_groups", model.num_query_groups, 0);
  if (model.num_attention_heads % model.query_groups() != 0) {
    throw ConfigError("model.num_query_groups", "model.num_attention_heads " +
                                                    text_of(model.num_attention_heads) +
                                                    " is not divisible by model.num_query_groups " +
                                                    text_of(model.query_groups()));
  }
  if (!model.learned_positions() && model.head_dim() % 2 != 0) {
    throw ConfigError("model.position_embedding",
                      "rope needs an even head dim; " + head_dim_text(model));
  }
  if (!(model.rotary_base > 1.f)) {
    throw ConfigError("model.rotary_base", "must be > 1, got " + text_of(model.rotary_base));
  }
  validate_rope_scaling(model);
  if (model.qk_layernorm && model.normalization != model::Normalization::rmsnorm) {
    throw ConfigError("model.qk_layernorm",
                      "true needs model.normalization rmsnorm (the query and key heads' norm is "
                      "the block's), got layernorm");
  }
  if (model.attention_backend == model::AttentionBackend::flash &&
      model.head_dim() > runtime::kFlashMaxHeadDim) {
    throw ConfigError("model.attention_backend", "flash supports head dims up to " +
                                                     text_of(runtime::kFlashMaxHeadDim) + "; " +
                                                     head_dim_text(model));
  }
  check_at_least<int64_t>("model.sliding_window", model.sliding_window, 0);
  check_at_least<int64_t>("model.ffn_hidden_size", model.ffn_hidden_size, 0);
  if (model.ffn_hidden_size == 0 && !product(model.hidden_size, 4)) {
    throw ConfigError("model.hidden_size", text_of(model.hidden_size) +
                                               " is too large for model.ffn_hidden_size 0 "
                                               "(4 x model.hidden_size overflows int64)");
  }
  check_at_least<int64_t>("model.seq_length", model.seq_length, 1);
  if (model.max_position_embeddings != 0 && model.max_position_embeddings < model.seq_length) {
    throw ConfigError("model.max_position_embeddings",
                      "must be 0 (= model.seq_length) or >= model.seq_length " +
                          text_of(model.seq_length) + ", got " +
                          text_of(model.max_position_embeddings));
  }
  constexpr int64_t kMaxVocab = std::numeric_limits<int32_t>::max();  // token ids are int32
  if (model.vocab_size < 1 || model.vocab_size > kMaxVocab) {
    throw ConfigError("model.vocab_size", "must be in [1, " + text_of(kMaxVocab) + "], got " +
                                              text_of(model.vocab_size));
  }
  check_at_least<int64_t>("model.make_vocab_size_divisible_by", model.make_vocab_size_divisible_by,
                          1);
  check_unit_interval("model.hidden_dropout", model.hidden_dropout);
  check_unit_interval("model.attention_dropout", model.attention_dropout);
  check_positive("model.init_method_std", model.init_method_std);
  check_positive("model.layernorm_epsilon", model.layernorm_epsilon);
}

void validate_parallel_sizes(const parallel::ParallelConfig& parallel) {
  check_at_least<int64_t>("parallel.tensor", parallel.tensor, 1);
  check_at_least<int64_t>("parallel.pipeline", parallel.pipeline, 1);
  check_at_least<int64_t>("parallel.data", parallel.data, 1);
  check_at_least<int64_t>("parallel.context", parallel.context, 1);
  check_at_least<int64_t>("parallel.virtual_pipeline", parallel.virtual_pipeline, 1);
}

void validate_train(const TrainConfig& train, const parallel::ParallelConfig& parallel) {
  check_at_least<int64_t>("train.steps", train.steps, 0);
  check_at_least<int64_t>("train.micro_batch_size", train.micro_batch_size, 1);
  check_at_least<int64_t>("train.global_batch_size", train.global_batch_size, 1);
  const std::optional<int64_t> per_step = product(train.micro_batch_size, parallel.data);
  if (!divisible(train.global_batch_size, per_step)) {
    throw ConfigError("train.global_batch_size",
                      text_of(train.global_batch_size) +
                          " is not divisible by train.micro_batch_size " +
                          text_of(train.micro_batch_size) + " x parallel.data " +
                          text_of(parallel.data) + " = " + text_of(per_step));
  }
  check_at_least<int64_t>("train.log_interval", train.log_interval, 1);
  if (!(std::isfinite(train.exit_duration_minutes) && train.exit_duration_minutes >= 0)) {
    throw ConfigError("train.exit_duration_minutes", "must be finite and >= 0 (0: never), got " +
                                                         text_of(train.exit_duration_minutes));
  }
  check_at_least<int64_t>("train.eval_interval", train.eval_interval, 0);
  if (train.eval_interval > 0 && train.eval_iters < 1) {
    throw ConfigError("train.eval_iters", "must be >= 1 when train.eval_interval is " +
                                              text_of(train.eval_interval) + ", got " +
                                              text_of(train.eval_iters));
  }
  if (train.precision == Precision::bf16 && train.device != Device::cuda) {
    throw ConfigError("train.precision", "bf16 requires train.device cuda, got train.device " +
                                             std::string(config_detail::enum_name(train.device)));
  }
  if (!(train.memory_budget_gib >= 0 && std::isfinite(train.memory_budget_gib))) {
    throw ConfigError("train.memory_budget_gib",
                      "must be >= 0 (0: no budget), got " + text_of(train.memory_budget_gib));
  }
  if (!(train.peak_tflops >= 0 && std::isfinite(train.peak_tflops))) {
    throw ConfigError("train.peak_tflops",
                      "must be >= 0 (0: the device's peak for the "
                      "precision), got " +
                          text_of(train.peak_tflops));
  }
  if (parallel.backend == parallel::CommBackend::nccl && train.device != Device::cuda) {
    throw ConfigError("parallel.backend", "nccl requires train.device cuda, got train.device " +
                                              std::string(config_detail::enum_name(train.device)));
  }
}

// train.sample_interval's sample: new tokens that leave the prompt a learned position.
void validate_sampling(const TrainConfig& train, const model::GptConfig& model) {
  check_at_least<int64_t>("train.sample_interval", train.sample_interval, 0);
  if (train.sample_interval > 0) {
    check_at_least<int64_t>("train.sample_tokens", train.sample_tokens, 1);
    if (model.learned_positions() && train.sample_tokens >= model.positions()) {
      throw ConfigError("train.sample_tokens",
                        text_of(train.sample_tokens) + " leaves no room for the prompt in the " +
                            text_of(model.positions()) +
                            " learned positions (model.seq_length / max_position_embeddings)");
    }
  }
}

// lr_wsd_decay_steps: set (>= 1) exactly when the decay style is wsd. Its bound by the decay
// steps after warmup is validate_optimizer's, which knows the decay steps.
void validate_wsd_steps(const OptimizerConfig& optimizer) {
  check_at_least<int64_t>("optimizer.lr_wsd_decay_steps", optimizer.lr_wsd_decay_steps, 0);
  const bool wsd = optimizer.lr_decay_style == DecayStyle::wsd;
  if (!wsd && optimizer.lr_wsd_decay_steps != 0) {
    throw ConfigError("optimizer.lr_wsd_decay_steps",
                      text_of(optimizer.lr_wsd_decay_steps) +
                          " applies to optimizer.lr_decay_style wsd only, not " +
                          std::string(config_detail::enum_name(optimizer.lr_decay_style)) +
                          " (set lr_decay_style: wsd, or drop lr_wsd_decay_steps)");
  }
  if (wsd && optimizer.lr_wsd_decay_steps == 0) {
    throw ConfigError("optimizer.lr_wsd_decay_steps",
                      "must be >= 1 with optimizer.lr_decay_style wsd (the steps of its final "
                      "decay to optimizer.min_lr), got 0");
  }
}

void validate_optimizer(const OptimizerConfig& optimizer, const TrainConfig& train) {
  check_positive("optimizer.lr", optimizer.lr);
  if (!(optimizer.min_lr >= 0 && optimizer.min_lr <= optimizer.lr)) {
    throw ConfigError("optimizer.min_lr", "must be in [0, optimizer.lr " + text_of(optimizer.lr) +
                                              "], got " + text_of(optimizer.min_lr));
  }
  check_non_negative("optimizer.weight_decay", optimizer.weight_decay);
  check_unit_interval("optimizer.adam_beta1", optimizer.adam_beta1);
  check_unit_interval("optimizer.adam_beta2", optimizer.adam_beta2);
  check_positive("optimizer.adam_eps", optimizer.adam_eps);
  check_non_negative("optimizer.clip_grad", optimizer.clip_grad);
  check_at_least<int64_t>("optimizer.lr_warmup_steps", optimizer.lr_warmup_steps, 0);
  check_at_least<int64_t>("optimizer.lr_decay_steps", optimizer.lr_decay_steps, 0);
  validate_wsd_steps(optimizer);
  const bool wsd = optimizer.lr_decay_style == DecayStyle::wsd;
  // Buckets from 1 KiB (256 fp32 gradients) to 64 GiB; 0 is one bucket.
  constexpr double kMinBucketMb = 1.0 / 1024, kMaxBucketMb = 65536;
  const double bucket_mb = optimizer.bucket_mb;
  if (!(bucket_mb == 0 || (bucket_mb >= kMinBucketMb && bucket_mb <= kMaxBucketMb))) {
    throw ConfigError("optimizer.bucket_mb",
                      "must be 0 (one bucket) or in [" + text_of(kMinBucketMb) + ", " +
                          text_of(kMaxBucketMb) + "] MiB, got " + text_of(bucket_mb));
  }
  if (train.steps > 0) {
    const bool from_steps = optimizer.lr_decay_steps == 0;
    const int64_t decay_steps = from_steps ? train.steps : optimizer.lr_decay_steps;
    if (optimizer.lr_warmup_steps > decay_steps) {
      throw ConfigError(
          "optimizer.lr_warmup_steps",
          text_of(optimizer.lr_warmup_steps) + " exceeds the decay steps " + text_of(decay_steps) +
              (from_steps ? " (optimizer.lr_decay_steps 0, so train.steps " + text_of(train.steps)
                          : " (optimizer.lr_decay_steps " + text_of(decay_steps)) +
              ")");
    }
    const int64_t after_warmup = decay_steps - optimizer.lr_warmup_steps;
    if (wsd && optimizer.lr_wsd_decay_steps > after_warmup) {
      throw ConfigError("optimizer.lr_wsd_decay_steps",
                        text_of(optimizer.lr_wsd_decay_steps) + " exceeds the " +
                            text_of(after_warmup) + " decay steps after warmup (" +
                            (from_steps ? "train.steps " : "optimizer.lr_decay_steps ") +
                            text_of(decay_steps) + " less optimizer.lr_warmup_steps " +
                            text_of(optimizer.lr_warmup_steps) + ")");
    }
  }
}

// data.path or data.blend (one of them): every blend dataset named, every weight positive.
void validate_data_sources(const DataConfig& data) {
  if (!data.path.empty() && !data.blend.empty()) {
    const size_t count = data.blend.size();
    throw ConfigError("data.path", "'" + data.path + "' and data.blend (" + std::to_string(count) +
                                       (count == 1 ? " dataset" : " datasets") +
                                       ") are exclusive: keep one of them (--set data.path=~ "
                                       "or data.blend=~ unsets one)");
  }
  if (data.path.empty() && data.blend.empty()) {
    throw ConfigError("data.path",
                      "must name a dataset (the prefix of <path>.bin / <path>.idx), or data.blend "
                      "list datasets with weights");
  }
  for (size_t i = 0; i < data.blend.size(); ++i) {
    const BlendEntry& entry = data.blend[i];
    const std::string item = "data.blend[" + std::to_string(i) + "]";
    if (entry.path.empty()) {
      throw ConfigError(item + ".path", "must name a dataset (the prefix of <path>.bin / .idx)");
    }
    if (!(entry.weight > 0 && std::isfinite(entry.weight))) {
      throw ConfigError(item + ".weight", text_of(entry.weight) + " must be > 0 and finite (" +
                                              item + ".path '" + entry.path + "')");
    }
  }
}

void validate_data(const DataConfig& data, const TrainConfig& train,
                   const model::GptConfig& model) {
  validate_data_sources(data);
  if (data.eod_id != -1 && !data.eod_mask_loss && !data.document_starts()) {
    throw ConfigError("data.eod_id", text_of(data.eod_id) +
                                         " is only read with data.eod_mask_loss, "
                                         "data.reset_attention_mask or data.reset_position_ids "
                                         "true (all are false); unset data.eod_id or set one of "
                                         "them");
  }
  if (data.eod_id < -1 || data.eod_id >= model.vocab_size) {
    throw ConfigError("data.eod_id",
                      "must be a token id below model.vocab_size " + text_of(model.vocab_size) +
                          " (or -1: the datasets' tokenizer's), got " + text_of(data.eod_id));
  }
  const std::vector<double>& split = data.split;
  if (split.empty() || split.size() > 3) {
    throw ConfigError("data.split", "must have 1 to 3 entries (train, validation, test), got " +
                                        text_of(static_cast<int64_t>(split.size())));
  }
  for (size_t index = 0; index < split.size(); ++index) {
    if (!(split[index] >= 0 && std::isfinite(split[index]))) {
      throw ConfigError("data.split[" + std::to_string(index) + "]",
                        "must be finite and >= 0, got " + text_of(split[index]));
    }
  }
  if (!(split[0] > 0)) {
    throw ConfigError("data.split[0]", "the train weight must be > 0, got " + text_of(split[0]));
  }
  if (train.eval_interval > 0 && (split.size() < 2 || !(split[1] > 0))) {
    throw ConfigError("data.split",
                      "needs a validation weight > 0 (second entry) when "
                      "train.eval_interval is " +
                          text_of(train.eval_interval) + ", got " +
                          (split.size() < 2 ? std::string("no second entry") : text_of(split[1])));
  }
}

// Context parallelism cuts the sequence into 2 x context chunks (Note [Context chunks]) and
// runs ring attention on the flash kernels.
void validate_context_parallel(const parallel::ParallelConfig& parallel,
                               const model::GptConfig& model) {
  if (parallel.context == 1) return;
  const std::optional<int64_t> chunks = product(int64_t{2}, parallel.context);
  if (!divisible(model.seq_length, chunks)) {
    throw ConfigError("model.seq_length", text_of(model.seq_length) +
                                              " is not divisible by 2 x parallel.context " +
                                              text_of(parallel.context) + " = " + text_of(chunks));
  }
  if (model.attention_backend != model::AttentionBackend::flash) {
    throw ConfigError("model.attention_backend",
                      "must be flash when parallel.context is " + text_of(parallel.context) +
                          " (ring attention runs on the flash kernels), got " +
                          model::attention_backend_name(model.attention_backend));
  }
}

void validate_parallel_layout(const parallel::ParallelConfig& parallel,
                              const model::GptConfig& model) {
  if (model.num_attention_heads % parallel.tensor != 0) {
    throw ConfigError("model.num_attention_heads", text_of(model.num_attention_heads) +
                                                       " is not divisible by parallel.tensor " +
                                                       text_of(parallel.tensor));
  }
  if (model.query_groups() % parallel.tensor != 0) {
    throw ConfigError("model.num_query_groups",
                      text_of(model.query_groups()) +
                          " key/value heads are not divisible by parallel.tensor " +
                          text_of(parallel.tensor) + " (tensor parallelism splits whole groups)");
  }
  if (model.ffn() % parallel.tensor != 0) {
    throw ConfigError(
        "model.ffn_hidden_size",
        "the FFN size " + text_of(model.ffn()) +
            (model.ffn_hidden_size == 0 ? " (4 x model.hidden_size, as it is 0)" : std::string()) +
            " is not divisible by parallel.tensor " + text_of(parallel.tensor));
  }
  if (parallel.virtual_pipeline > 1 && parallel.pipeline == 1) {
    throw ConfigError("parallel.virtual_pipeline", text_of(parallel.virtual_pipeline) +
                                                       " requires parallel.pipeline > 1, got " +
                                                       text_of(parallel.pipeline));
  }
  const std::vector<int64_t>& stages = parallel.layers_per_stage;
  if (stages.empty()) {
    const std::optional<int64_t> chunks = product(parallel.pipeline, parallel.virtual_pipeline);
    if (!divisible(model.num_layers, chunks)) {
      throw ConfigError("model.num_layers",
                        text_of(model.num_layers) + " is not divisible by parallel.pipeline " +
                            text_of(parallel.pipeline) + " x parallel.virtual_pipeline " +
                            text_of(parallel.virtual_pipeline) + " = " + text_of(chunks));
    }
  } else {
    if (static_cast<int64_t>(stages.size()) != parallel.pipeline) {
      throw ConfigError("parallel.layers_per_stage",
                        "has " + text_of(static_cast<int64_t>(stages.size())) +
                            " entries but parallel.pipeline is " + text_of(parallel.pipeline));
    }
    int64_t total = 0;
    bool overflow = false;
    for (size_t stage = 0; stage < stages.size(); ++stage) {
      check_at_least<int64_t>("parallel.layers_per_stage[" + std::to_string(stage) + "]",
                              stages[stage], 1);
      overflow = overflow || __builtin_add_overflow(total, stages[stage], &total);
    }
    if (overflow || total != model.num_layers) {
      throw ConfigError("parallel.layers_per_stage",
                        "entries sum to " + (overflow ? "more than int64" : text_of(total)) +
                            " but model.num_layers is " + text_of(model.num_layers));
    }
    if (parallel.virtual_pipeline != 1) {
      throw ConfigError("parallel.virtual_pipeline",
                        "must be 1 when parallel.layers_per_stage is given, got " +
                            text_of(parallel.virtual_pipeline));
    }
  }
  validate_context_parallel(parallel, model);
  const int64_t local_seq = model.seq_length / parallel.context;
  if (parallel.sequence_parallel && parallel.tensor > 1 && local_seq % parallel.tensor != 0) {
    throw ConfigError(
        "parallel.sequence_parallel",
        "requires model.seq_length " + text_of(model.seq_length) +
            (parallel.context > 1
                 ? " / parallel.context " + text_of(parallel.context) + " = " + text_of(local_seq)
                 : std::string()) +
            " to be divisible by parallel.tensor " + text_of(parallel.tensor));
  }
}

void check_finite_at_least(const std::string& path, double value, double minimum) {
  if (!(value >= minimum && std::isfinite(value))) {
    throw ConfigError(path,
                      "must be finite and >= " + text_of(minimum) + ", got " + text_of(value));
  }
}

// train.guard, train.inject and data.skip_batches.
void validate_guard(const Config& config) {
  const GuardConfig& guard = config.train.guard;
  if (!(guard.loss_spike_factor > 1 && std::isfinite(guard.loss_spike_factor))) {
    throw ConfigError("train.guard.loss_spike_factor",
                      "must be finite and > 1, got " + text_of(guard.loss_spike_factor));
  }
  check_at_least<int64_t>("train.guard.window", guard.window, 1);
  check_at_least<int64_t>("train.guard.max_rewinds", guard.max_rewinds, 0);
  if (guard.action == GuardAction::rewind && config.checkpoint.dir.empty()) {
    throw ConfigError("train.guard.action",
                      "rewind reloads the last checkpoint, so checkpoint.dir must be set");
  }
  check_at_least<int64_t>("train.inject.step", config.train.inject.step, 0);
  if (std::isnan(config.train.inject.scale_loss)) {
    throw ConfigError("train.inject.scale_loss", "must be a number, got .nan");
  }
  const std::vector<BatchRange>& skips = config.data.skip_batches;
  for (size_t i = 0; i < skips.size(); ++i) {
    const std::string path = "data.skip_batches[" + std::to_string(i) + "]";
    if (skips[i].first < 0 || skips[i].last < skips[i].first) {
      throw ConfigError(path, "must be [first, last] with 0 <= first <= last, got [" +
                                  text_of(skips[i].first) + ", " + text_of(skips[i].last) + "]");
    }
  }
}

void validate_targets(const Config& config) {
  const TargetsConfig& targets = config.targets;
  check_finite_at_least("targets.min_tokens_per_s", targets.min_tokens_per_s, 0);
  check_finite_at_least("targets.max_memory_gib", targets.max_memory_gib, 0);
  check_at_least<int64_t>("targets.max_loss.at_step", targets.max_loss.at_step, 0);
  if (targets.max_loss.at_step > config.train.steps) {
    throw ConfigError("targets.max_loss.at_step",
                      text_of(targets.max_loss.at_step) + " is beyond train.steps " +
                          text_of(config.train.steps) + ", so it would never be checked");
  }
  if (targets.max_loss.at_step > 0) {
    check_finite_at_least("targets.max_loss.value", targets.max_loss.value, 0);
  }
  check_at_least<int64_t>("targets.window", targets.window, 1);
  if (!(targets.throughput_drift_fraction >= 0 && targets.throughput_drift_fraction < 1)) {
    throw ConfigError("targets.throughput_drift_fraction",
                      "must be in [0, 1), got " + text_of(targets.throughput_drift_fraction));
  }
  if (targets.action == TargetAction::checkpoint_and_stop && config.checkpoint.dir.empty()) {
    throw ConfigError("targets.action",
                      "checkpoint_and_stop writes a checkpoint, so checkpoint.dir must be set");
  }
}

void validate_memory_timeline(const TrainConfig& train) {
  check_at_least<int64_t>("train.memory_timeline_step", train.memory_timeline_step, 0);
  if (train.memory_timeline_step > train.steps) {
    throw ConfigError("train.memory_timeline_step",
                      text_of(train.memory_timeline_step) + " is beyond train.steps " +
                          text_of(train.steps) + ", so no step would be recorded");
  }
}

void validate_trace(const TrainConfig& train) {
  const TraceConfig& trace = train.trace;
  check_at_least<int64_t>("train.trace.steps", trace.steps, 0);
  if (trace.steps == 0) return;
  check_at_least<int64_t>("train.trace.start_step", trace.start_step, 1);
  if (trace.start_step > train.steps) {
    throw ConfigError("train.trace.start_step",
                      text_of(trace.start_step) + " is beyond train.steps " + text_of(train.steps) +
                          ", so nothing would be traced");
  }
}

}  // namespace

void validate_config(const Config& config, ConfigUse use) {
  validate_model(config.model);
  validate_parallel_sizes(config.parallel);
  validate_train(config.train, config.parallel);
  validate_sampling(config.train, config.model);
  validate_optimizer(config.optimizer, config.train);
  if (use == ConfigUse::train) validate_data(config.data, config.train, config.model);
  validate_parallel_layout(config.parallel, config.model);
  const parallel::ParallelConfig& pc = config.parallel;
  const int64_t microbatches = num_microbatches(config);
  if (pc.virtual_pipeline > 1 && microbatches % pc.pipeline != 0) {
    throw ConfigError("parallel.virtual_pipeline",
                      "interleaving needs the microbatches per step (train.global_batch_size " +
                          text_of(config.train.global_batch_size) + " / (train.micro_batch_size " +
                          text_of(config.train.micro_batch_size) + " x parallel.data " +
                          text_of(pc.data) + ") = " + text_of(microbatches) +
                          ") to be divisible by parallel.pipeline " + text_of(pc.pipeline));
  }
  if (config.recompute.automatic && config.train.memory_budget_gib <= 0) {
    throw ConfigError("recompute.auto",
                      "needs train.memory_budget_gib, the memory the planner plans under "
                      "(got " +
                          text_of(config.train.memory_budget_gib) + ")");
  }
  recompute::validate_recompute(
      config.recompute, config.model.num_layers,
      parallel::stage_layer_chunks(config.parallel, config.model.num_layers));
  if (config.output.dir.empty()) throw ConfigError("output.dir", "must not be empty");
  const std::string hf_mismatch = model::hf_family_mismatch(config.model);
  const std::string hf_class = model::hf_class_name(config.model);
  if (config.output.export_model && !hf_mismatch.empty()) {
    throw ConfigError("output.export", std::string("the export writes ") + hf_class +
                                           ", which has no place for " + hf_mismatch +
                                           "; set output.export false");
  }
  if (!config.train.init_from.empty() && !hf_mismatch.empty()) {
    throw ConfigError("train.init_from", std::string("imports ") + hf_class +
                                             " weights, which have no place for " + hf_mismatch);
  }
  check_at_least<int64_t>("checkpoint.interval", config.checkpoint.interval, 0);
  check_at_least<int64_t>("train.max_skipped_steps", config.train.max_skipped_steps, 0);
  if (config.checkpoint.interval > 0 && config.checkpoint.dir.empty()) {
    throw ConfigError("checkpoint.dir", "must be set when checkpoint.interval is " +
                                            text_of(config.checkpoint.interval));
  }
  validate_guard(config);
  validate_targets(config);
  validate_trace(config.train);
  validate_memory_timeline(config.train);
}

void validate_launch(const Config& config, int64_t world_size) {
  const parallel::ParallelConfig& parallel = config.parallel;
  std::optional<int64_t> expected = 1;
  for (const int64_t size : {parallel.tensor, parallel.context, parallel.pipeline, parallel.data})
    expected = expected ? product(*expected, size) : std::nullopt;
  if (expected != world_size) {
    throw ConfigError("parallel", "launched with " + text_of(world_size) + " ranks but tensor " +
                                      text_of(parallel.tensor) + " x context " +
                                      text_of(parallel.context) + " x pipeline " +
                                      text_of(parallel.pipeline) + " x data " +
                                      text_of(parallel.data) + " = " + text_of(expected));
  }
}

}  // namespace trainer
