// The run's configuration: typed structs filled from YAML (+ --set overrides) and
// validated as a whole before anything is allocated. Every key is documented
// here; unknown keys are rejected with their YAML path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "parallel/core/parallel_config.h"
#include "recompute/recompute_config.h"
#include "runtime/dtype.h"

namespace trainer {

enum class DecayStyle { constant, linear, cosine, inverse_square_root, wsd };
// The shape of a WSD schedule's final decay (Megatron's --lr-wsd-decay-style).
enum class WsdDecayStyle { exponential, linear, cosine, minus_sqrt };
enum class Device { cpu, cuda };
enum class Precision { automatic, fp32, bf16 };  // automatic: bf16 on cuda, fp32 on cpu
enum class OnNonfinite { stop, skip_step };
// What recompute.auto minimises: the predicted step time, or Megatron's matmul FLOPs count.
enum class PlanObjective { time, flops };
enum class GuardAction { off, warn, skip_step, rewind };
enum class TargetAction { warn, checkpoint_and_stop };

// The divergence guard (docs/operations.md, "Divergence guard"): a step whose loss exceeds
// loss_spike_factor x the median loss of the last `window` applied steps is a spike, and so is
// a non-finite loss or gradient norm (at any time; a ratio needs a full window).
struct GuardConfig {
  GuardAction action = GuardAction::off;
  double loss_spike_factor = 3.0;
  int64_t window = 100;     // applied steps in the running median
  int64_t max_rewinds = 3;  // rewind: the spike after this many rewinds stops the run
};

// Test hook (fault injection): the global batch that step `step` trains on in a run without
// skipped batches (batch step - 1) gets its loss and gradients scaled by scale_loss.
// step 0: off. Tied to the batch, so a rewind that skips it never meets it again.
struct InjectConfig {
  int64_t step = 0;
  double scale_loss = 1.0;
};

// A schedule trace (docs/operations.md, "Schedule trace"): steps start_step ..
// start_step + steps - 1 are recorded and written to <output.dir>/trace_rank<R>.json by every
// rank. steps 0: off.
struct TraceConfig {
  int64_t start_step = 1;  // 1-based
  int64_t steps = 0;
};

struct TrainConfig {
  int64_t steps = 100;            // optimizer steps; 0 is valid (writes the initial model)
  int64_t micro_batch_size = 8;   // samples per forward/backward
  int64_t global_batch_size = 8;  // samples per optimizer step (all ranks, all microbatches)
  uint64_t seed = 1234;           // init, dropout (Philox) and data shuffling
  int64_t log_interval = 1;       // a stdout line every N steps (metrics.jsonl: every step)
  int64_t eval_interval = 0;      // validation every N steps and at the end; 0: never
  int64_t eval_iters = 4;         // validation global batches per evaluation
  // A sample from the model every N steps, printed and written to events.jsonl (as llm.c does);
  // 0: never. Seeded by train.seed (temperature 1, the whole vocabulary).
  int64_t sample_interval = 0;
  std::string sample_prompt;   // the text the sample continues; "": the eod token (a new document)
  int64_t sample_tokens = 32;  // new tokens per sample
  Device device = Device::cpu;
  Precision precision = Precision::automatic;  // parse_config resolves auto; see uses_bf16
  // The MFU denominator on a GPU, TFLOP/s; 0: H100/H200 SXM's dense peak for the precision
  // (kBf16PeakTflops or kFp32PeakTflops). On cpu the CPU's peak is used
  // (trainer/observe/mfu_peak.h).
  double peak_tflops = 0.0;
  OnNonfinite on_nonfinite = OnNonfinite::stop;  // a non-finite loss or gradient norm
  int64_t max_skipped_steps = 5;                 // skip_step: this many skips in a row stop the run
  // Stop after the first step that ends this many wall-clock minutes after the trainer started
  // (on any rank), with a checkpoint written, exit 0: a run that resumes under a job time limit
  // (Megatron's --exit-duration-in-mins). 0: never.
  double exit_duration_minutes = 0;
  // HF weights to start from (not on resume): model.safetensors, a sharded checkpoint's
  // model.safetensors.index.json, or a directory holding either; the class model::hf_class_name
  // names (GPT-2, Llama, Qwen2 or Qwen3).
  std::string init_from;
  GuardConfig guard;
  InjectConfig inject;  // a test hook; see InjectConfig
  TraceConfig trace;
  // The allocator's every alloc and free during this step (1-based), written with the meta
  // replay's prediction to <output.dir>/memory_timeline_{measured,predicted}_rank<R>.json and
  // .trace.json (docs/operations.md, "Memory timeline"); 0: off.
  int64_t memory_timeline_step = 0;
  // Device memory per rank, GiB (2^30 bytes), that recompute.auto plans under and `trainer plan`
  // checks against; 0: none.
  double memory_budget_gib = 0.0;
  // recompute.auto's objective (docs/planning.md): `time` prices each rebuild by its measured
  // seconds (time_profile, else a calibration at startup on the training device); `flops` by
  // its matmul FLOPs.
  PlanObjective plan_objective = PlanObjective::time;
  // A profile written by `trainer calibrate` for this run's shapes; "": calibrate at startup
  // when recompute.auto plans by time, else the roofline of measured rates.
  std::string time_profile;
};

// Dense peaks of an H100/H200 SXM: bf16 tensor cores, and fp32 without TF32 (the fp32
// path computes in true fp32 to match the CPU).
constexpr double kBf16PeakTflops = 989.4;
constexpr double kFp32PeakTflops = 66.9;

// Whether the run computes in bf16 (precision bf16, or auto on cuda).
inline bool uses_bf16(const TrainConfig& train) {
  return train.precision == Precision::bf16 ||
         (train.precision == Precision::automatic && train.device == Device::cuda);
}

struct CheckpointConfig {
  std::string dir;        // empty: no checkpoints
  int64_t interval = 0;   // save every N steps (0: only at the end and on SIGTERM/SIGINT)
  int64_t keep_last = 2;  // step directories kept (<= 0: all)
  bool async = false;     // write on a background thread from a snapshot; training goes on
};

struct OptimizerConfig {
  float lr = 1e-3f;            // peak learning rate
  float min_lr = 0.f;          // floor of the decay
  float weight_decay = 0.01f;  // decoupled; only on tensors of rank >= 2
  float adam_beta1 = 0.9f;
  float adam_beta2 = 0.999f;
  float adam_eps = 1e-8f;
  float clip_grad = 1.0f;       // global L2 norm; 0 disables clipping
  int64_t lr_warmup_steps = 0;  // linear from 0
  int64_t lr_decay_steps = 0;   // 0: train.steps (decay ends there, then min_lr)
  DecayStyle lr_decay_style = DecayStyle::cosine;
  // wsd (warmup-stable-decay): the peak until the last lr_wsd_decay_steps of the decay steps,
  // then down to min_lr in lr_wsd_decay_style's shape. Set only with lr_decay_style wsd.
  int64_t lr_wsd_decay_steps = 0;
  WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::exponential;
  // ZeRO-1: fp32 master weights and moments sharded over the dp ranks, gradients
  // reduce-scattered to their owners, updated weights all-gathered (docs/memory.md).
  bool distributed = false;
  // Gradient reduction buckets, MiB of fp32 gradients each (0: the whole buffer in one).
  double bucket_mb = 0;
  // Start each bucket's reduction during backward as soon as its gradients are final (else all
  // after backward); the results are bit-identical either way.
  bool overlap_grad_reduce = true;
};

// Global batches [first, last] (0-based, in the order of a run without skips) that training
// never reads; YAML `[first, last]`.
struct BatchRange {
  int64_t first = 0;
  int64_t last = 0;
  bool operator==(const BatchRange&) const = default;
};

// One dataset of data.blend: the prefix of <path>.bin / <path>.idx and its weight (any
// positive number; a blend's weights are normalised to sum to 1).
struct BlendEntry {
  std::string path;
  double weight = 0;
  bool operator==(const BlendEntry&) const = default;
};

struct DataConfig {
  std::string path;  // prefix of <path>.bin / <path>.idx (Megatron indexed); or blend
  // Datasets mixed by weight (docs/data.md, "Blended datasets"); exclusive with path. YAML: a
  // list of {path, weight} maps, or Megatron's flat list [0.7, data/web, 0.3, data/code].
  std::vector<BlendEntry> blend;
  std::vector<double> split = {98, 2};  // train / validation weights over the token stream
  bool shuffle = false;                 // false: samples in order; true: seeded permutation
  // Batches to skip, e.g. [[400, 599]]; a guard rewind adds its window in the checkpoint.
  std::vector<BatchRange> skip_batches;
  // Megatron's --eod-mask-loss: a position whose input token is the end-of-document token takes
  // no part in the loss (its target is the next document's first token), and the loss is the
  // mean over the positions that count, over the whole global batch (docs/data.md).
  bool eod_mask_loss = false;
  // Megatron's --reset-attention-mask: a sequence packs documents, and attention stops at their
  // ends; a position after an end-of-document token sees no key before it (docs/data.md, Note
  // [Document masking] in runtime/op_args.h).
  bool reset_attention_mask = false;
  // Megatron's --reset-position-ids: positions restart at 0 after each end-of-document token,
  // in the learned position embedding or the rotary one (docs/data.md, Note [Document
  // positions] in runtime/op_args.h).
  bool reset_position_ids = false;
  // The end-of-document id the three switches above use: -1 takes the tokenizer's that the
  // datasets' <path>.json names; set it for data without one (a Megatron-made .bin/.idx).
  int64_t eod_id = -1;

  // Whether every microbatch carries its documents' starts (either switch that reads them).
  bool document_starts() const { return reset_attention_mask || reset_position_ids; }
};

// The datasets a run reads, in blend order: data.blend, or data.path alone with weight 1.
inline std::vector<BlendEntry> data_sources(const DataConfig& data) {
  if (!data.blend.empty()) return data.blend;
  return {BlendEntry{.path = data.path, .weight = 1.0}};
}

struct OutputConfig {
  std::string dir = "runs/default";  // metrics.jsonl, config.yaml, model.safetensors
  bool export_model = true;          // YAML key `export`: write model.safetensors + config.json
  runtime::DType export_dtype = runtime::DType::f32;  // float32 | bfloat16 (rounded to nearest)
  bool tensorboard = false;  // TensorBoard scalars under <dir>/tensorboard/
};

// Targets as gates (docs/operations.md, "Targets"), checked every step and agreed across
// ranks. 0 turns a target off.
struct LossTarget {
  int64_t at_step = 0;  // the median loss of the window ending at this step; 0: off
  double value = 0;     // must not exceed
};

struct TargetsConfig {
  double min_tokens_per_s = 0;  // the median of the last `window` steps (the first one excluded)
  double max_memory_gib = 0;    // per rank: the sum of the category peaks of a step
  LossTarget max_loss;
  int64_t window = 50;  // steps in the medians
  TargetAction action = TargetAction::warn;
  // A throughput_drift event when tokens/s falls below this fraction of its running median
  // over `window` steps; 0: off.
  double throughput_drift_fraction = 0.5;
};

struct Config {
  model::GptConfig model;
  TrainConfig train;
  OptimizerConfig optimizer;
  DataConfig data;
  parallel::ParallelConfig parallel;
  recompute::RecomputeConfig recompute;
  CheckpointConfig checkpoint;
  OutputConfig output;
  TargetsConfig targets;
};

// Microbatches each data-parallel rank runs per optimizer step: train.global_batch_size /
// (train.micro_batch_size x parallel.data). validate_config checks the division is exact.
inline int64_t num_microbatches(const Config& config) {
  return config.train.global_batch_size / (config.train.micro_batch_size * config.parallel.data);
}

// What a config is read for: a run needs its dataset; a plan (`trainer plan`) needs only shapes,
// so it reads configs without data.path (or data.blend) too.
enum class ConfigUse { train, plan };

// Parses YAML text; `source` names it in messages. Applies `overrides`
// ("a.b=c", YAML-typed values) before validation. Throws runtime::ConfigError.
Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {},
                    ConfigUse use = ConfigUse::train);
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   ConfigUse use = ConfigUse::train);

// Cross-field rules that need no launch information (divisibility, ranges).
void validate_config(const Config& config, ConfigUse use = ConfigUse::train);
// Rules that need the launch: world size against tensor * context * pipeline * data.
void validate_launch(const Config& config, int64_t world_size);

// The effective configuration as YAML (every field, defaults resolved), such that
// parse_config(to_yaml(c)) == c.
std::string to_yaml(const Config& config);
// The `recompute:` section alone, to paste into a config (`trainer plan --emit-yaml`).
std::string recompute_yaml(const recompute::RecomputeConfig& recompute);
// The `model:` section alone (`trainer hf-config`).
std::string model_yaml(const model::GptConfig& model);

}  // namespace trainer
