// The training loop: builds the model, data and optimizer of a planned run (a RunPlan:
// trainer/planning/run_plan.h), then runs steps (schedule -> dp average -> clip -> AdamW),
// periodic validation, metrics, the guard, targets and event ledger, and the final export.
#pragma once

#include <chrono>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "parallel/core/process_groups.h"
#include "parallel/pipeline/schedules.h"
#include "recompute/executor.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/data/gpt_sampler.h"
#include "trainer/engine/optimizer.h"
#include "trainer/engine/rank_state.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/engine/training_data.h"
#include "trainer/observe/event_ledger.h"
#include "trainer/observe/metrics.h"
#include "trainer/observe/mfu_peak.h"
#include "trainer/planning/rank_memory.h"
#include "trainer/planning/run_plan.h"
#include "trainer/run/run_checks.h"
#include "trainer/run/run_recorder.h"
#include "trainer/run/sample_writer.h"
#include "trainer/run/skipped_batches.h"

namespace trainer {

// Why run() returned: train.steps done, or stopped early with a checkpoint written (when
// checkpoint.dir is set) by SIGTERM/SIGINT, train.exit_duration_minutes, a target gate
// (targets.action checkpoint_and_stop) or the divergence guard (a spike after
// train.guard.max_rewinds).
enum class StopReason { completed, signal, duration, target_missed, diverged };
std::string_view to_string(StopReason reason);

// Exit codes of `trainer train` (docs/operations.md, "Exit codes"): 0 for completed, signal
// and duration (a preempted or timed-out job resumes), 1 an error, 2 usage, and these.
inline constexpr int kExitTargetMissed = 3;
inline constexpr int kExitDiverged = 4;
int exit_code(StopReason reason);

// What one evaluation measured.
struct ValidationLosses {
  double overall = 0;               // sum over datasets of weight x loss (weights normalised)
  std::vector<double> per_dataset;  // mean token loss of each dataset, in blend order
};

struct TrainSummary {
  StopReason stop = StopReason::completed;
  int64_t steps = 0;
  double first_loss = 0, last_loss = 0;
  std::optional<double> last_val_loss;
  std::optional<double> loss_floor;  // synthetic data only
  double seconds = 0;
  double tokens_per_s = 0;
};

class Trainer {
 public:
  // Builds what `plan` planned on this rank (plan_run's, with the same groups and allocator):
  // the output directory, the datasets, the weights, gradients and optimizer state; logs the
  // plan and the run on the logging rank. Plans, calibrates and predicts nothing itself.
  Trainer(const RunPlan& plan, parallel::ProcessGroups& groups, runtime::Allocator& allocator,
          std::ostream& log);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Every step, validation, the export; returns what the summary line prints.
  // Stops after the current step on SIGTERM/SIGINT, writing a checkpoint.
  TrainSummary run();
  // Resumes from a checkpoint: "auto" (the latest under checkpoint.dir, if any)
  // or a step directory. Returns false when "auto" found none. metrics.jsonl and events.jsonl
  // then keep their lines through the checkpoint's step and are appended to.
  bool resume(const std::string& which);
  // Writes a checkpoint of the current state (collective). With checkpoint.async
  // it returns after a snapshot; finish_checkpoints() waits for the writes
  // (run() polls once per step and waits at the end).
  void save_checkpoint();
  void finish_checkpoints();
  // Loads Hugging Face weights (train.init_from: GPT-2 or Llama, one file or a sharded index)
  // into this rank's shard, reading only the tensors of the parameters it holds; returns the
  // bytes of them it read.
  int64_t init_from(const std::string& path);
  // One optimizer step (step number advances); the divergence guard may drop its update
  // (metrics.update_skipped) and ask run() to rewind (metrics.rewind).
  StepMetrics train_step();
  // Validation (docs/data.md, "Validation"): each dataset's mean token loss over eval_iters
  // global batches of its validation range, read in order from the start, and their mean
  // weighted by the blend's weights (for one dataset, its loss).
  ValidationLosses evaluate_datasets();
  double evaluate() { return evaluate_datasets().overall; }
  // The datasets this run reads and the training blend over them.
  const TrainingData& data() const { return *data_; }

  // The weights the model computes with (host or device; bf16 in a bf16 run), the fp32
  // master weights the optimizer updates (the same tensors in an fp32 run), and a host copy
  // of the master weights, refreshed on each call (collective-free, but over dp when a
  // distributed optimizer holds a bf16 run's master weights).
  const model::GptParams& params() const { return state_.params; }
  const model::GptParams& master_params() const { return state_.master; }
  const model::GptParams& host_params();
  const model::GptParams& grads() const { return state_.grads; }
  int64_t predicted_activation_peak() const { return state_.setup.predicted_activation_peak; }
  // The step-time model's step (trainer/planning/step_time.h), as the startup log gives it.
  double predicted_step_ms() const { return predicted_step_ms_; }
  // The config as run: recompute.auto replaced by its plan.
  const Config& config() const { return config_; }
  // What this rank's stage runs: chunks, plans, shapes, FLOPs and the memory prediction.
  const StageSetup& stage_setup() const { return state_.setup; }
  // The whole model's parameters or gradients on world rank 0 (collective; null elsewhere).
  std::unique_ptr<model::GptParams> gather(const model::GptParams& local);
  int64_t step() const { return step_; }
  // The batches this run skips (data.skip_batches, a checkpoint's, and its rewinds').
  const SkippedBatches& skipped_batches() const { return skipped_; }
  int64_t rewinds() const { return rewinds_; }

 private:
  // The constructor's steps, in order.
  void create_output_dir();
  void open_datasets();
  // build_rank_state's initialize step: the host copy of the weights on a device, the init of
  // the master weights and the compute weights from them.
  void init_weights();
  // The MFU denominator: the device's peak for the precision, or the CPU's
  // (trainer/observe/mfu_peak.h).
  PeakRate mfu_peak() const;
  // A CPU step faster than the peak (a disturbed startup measurement) raises the peak to the
  // higher of a new cpu_mfu_peak() and the step's rate, and says so: MFU stays <= 100%.
  void keep_peak_above(const StepMetrics& m);
  // The plan's startup lines: the predicted step, the profile calibrated at startup (written to
  // the run directory), recompute.auto's budget and proof.
  void log_plan(const RunPlan& plan);
  // config.yaml, and the run's description on the log.
  void start_logging();
  // run() less its error handling (an error's end event in the ledger, then rethrown).
  TrainSummary run_steps();

  // Microbatch `mb` of global batch `batch` for `chunk`: tokens where it has the
  // embedding, targets where it has the head, document starts everywhere with
  // data.reset_attention_mask or data.reset_position_ids.
  recompute::Microbatch make_microbatch(const SampleSource& sampler, int64_t batch, int64_t mb,
                                        const recompute::ChunkExecutor& chunk);
  // The whole model's config with the vocabulary padded as this run pads it
  // (padding grows with the tensor-parallel size): the shape of gathered weights.
  model::GptConfig whole_model_config() const;
  // The pipeline step of global batch `batch` of `sampler` (step 0: an evaluation), whose loss
  // is the mean over `counted` targets (batch_targets; a training step's at least 1).
  parallel::PipelineStep pipeline_step(const SampleSource& sampler, int64_t batch, int64_t step,
                                       int64_t counted);
  // The targets of global batch `batch` of `sampler` that count toward the loss: all of them,
  // or with data.eod_mask_loss those whose input is not the eod id.
  int64_t batch_targets(const SampleSource& sampler, int64_t batch) const;
  // One stdout line; the measured activation peak is followed by the prediction
  // when they differ (they should not), and the remaining time is estimated.
  void log_step(const StepMetrics& metrics, double seconds_per_step);
  // The "done:" line (steps, time, losses, the data's loss floor) and what was exported.
  void log_summary(const TrainSummary& summary, int64_t first_step);
  // Whether state_.master is a buffer of its own (bf16 runs) rather than state_.params itself (or
  // none: a distributed optimizer holds the master weights of a bf16 run in parts).
  bool has_master_copy() const { return state_.has_master_copy(); }
  // state_.params = state_.master rounded to the compute dtype, after the master weights were
  // written (init, resume, init_from); nothing in an fp32 run, where they are the same tensors.
  void refresh_compute_weights();
  // The first parameter of this rank whose gradient holds a NaN or an infinity, or "".
  std::string first_nonfinite_gradient() const;
  // train.inject (a test hook): scales the loss sum and the gradients of the injected batch.
  void inject_fault(int64_t batch, double& loss_sum);

  // train.sample_interval: the whole model gathered to world rank 0 (collective), a sample
  // there (samples_), its text on the log and a "sample" event in the ledger.
  void write_sample();

  // ---- Operating the run (train_operations.cpp; docs/operations.md) ----
  // Opens the run files once (recorder_.open: kept through the resumed step, else truncated),
  // with the start event and the resume event.
  void open_run_files();
  // On the logging rank, a line of the ledger (opening the run files first).
  void record_event(const Event& event);
  Event start_event() const;
  // train.guard and train.on_nonfinite on a step whose loss and gradient norm are known:
  // whether its update applies. Logs and records non_finite, loss_spike and skip_step
  // events; throws when the run must stop (on_nonfinite stop, max_skipped_steps).
  bool guard_step(StepMetrics& metrics);
  // Drops the step's update: throws after more than train.max_skipped_steps in a row.
  void skip_update(const StepMetrics& metrics, const std::string& why, const char* setting);
  // Rewinds to the last checkpoint, skipping the batches since (their window is recorded).
  // False when train.guard.max_rewinds are used up.
  bool rewind(const StepMetrics& metrics);
  // The targets' misses at this step that were not missing before, agreed across ranks
  // (collective when targets are set).
  std::vector<TargetMiss> check_targets(const StepMetrics& metrics, bool first_of_process);
  // After a step, before any stop or checkpoint: metrics.jsonl, the stdout line (every
  // log_interval steps, and on the first, the last, an evaluation's and a `stopping` step),
  // drift events, targets. Returns the reason to stop when a target gate says so.
  std::optional<std::string> observe_step(const StepMetrics& metrics, bool first_of_process,
                                          double seconds_per_step, bool stopping);
  // Checkpoint (when checkpoint.dir is set), message, end event; the summary to return.
  TrainSummary stop_run(TrainSummary summary, StopReason reason, const std::string& message);
  // Loads the state of the checkpoint `reader` reads (from `step_dir`, named in messages):
  // weights, moments, step, skipped batches, the guard's window, rewinds.
  void load_checkpoint_state(const CheckpointReader& reader, const std::string& step_dir);
  // The end-of-checkpoint bookkeeping of a written save: log, event, last_checkpoint_step_.
  void checkpoint_written(int64_t step, bool async);
  // Every rank's activation peak and comm bytes, measured and predicted, into `metrics` on
  // every rank (collective). `comm_bytes`: this rank's payload of the step so far.
  void gather_rank_numbers(StepMetrics& metrics, int64_t comm_bytes);

  RunTiming timing_;  // the time profile it planned and predicts with (RunPlan::timing)
  Config config_;     // recompute.auto resolved (RunPlan::config)
  parallel::ProcessGroups& groups_;
  runtime::Allocator& allocator_;
  std::ostream& log_;
  std::unique_ptr<TrainingData> data_;
  RankState state_;  // setup, weights, gradients, optimizer, executors (build_rank_state)
  int64_t predicted_comm_ = 0;           // payload bytes per step, this rank
  RankMemory predicted_memory_;          // every category's peak over a step, this rank
  RunRecorder recorder_;                 // the run files, the trace window, the memory timelines
  std::optional<int64_t> resumed_step_;  // the step resume() loaded, if any
  std::optional<Event> resume_event_;    // written after the start event
  std::optional<int64_t> last_checkpoint_step_;  // the last one this process wrote or read
  SkippedBatches skipped_;
  LossGuard guard_;
  TargetGate gate_;
  DriftMonitor drift_;
  int64_t rewinds_ = 0;
  int64_t steps_run_ = 0;  // train_step calls of this process
  std::unique_ptr<runtime::CpuAllocator> gather_allocator_;
  std::unique_ptr<AsyncCheckpointSave> pending_save_;
  bool on_device_ = false;                // the allocator is a device's: host data is uploaded
  runtime::CpuAllocator host_allocator_;  // staging of batches, init, checkpoints, export
  model::GptParams host_params_;          // host copy of state_.params on a device
  std::vector<int32_t> sample_buffer_;
  std::vector<int32_t> start_buffer_;    // a sample's document starts (DataConfig::document_starts)
  std::optional<SampleWriter> samples_;  // the prompt and tokenizer, checked at construction
  int64_t step_ = 0;                     // completed optimizer steps
  int64_t skipped_in_a_row_ = 0;
  PeakRate peak_;                 // the MFU denominator (mfu_peak, keep_peak_above)
  double predicted_step_ms_ = 0;  // the step-time model's (trainer/planning/step_time.h)
  // When the trainer started: train.exit_duration_minutes counts from here.
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
};

// "layers 0-3 full, layers 4-11 selective{core_attn}"
std::string describe_plan(const recompute::RecomputePlan& plan);

// Rejects configurations this build cannot run (train.device cuda without the CUDA backend),
// naming the field; `trainer train` calls it before it sets up a device.
void check_supported(const Config& config);

// The communicator of device tensors for a job of `world_size` ranks that use `distinct_gpus`
// different GPUs in all: with parallel.backend auto, NCCL when train.device is cuda, there is
// more than one rank and every rank has a GPU of its own; MPI (device tensors staged through
// host memory) otherwise, so ranks may share a GPU. backend nccl with shared GPUs is a
// ConfigError naming both counts. Every rank must pass the same counts (they agree).
parallel::CommBackend resolve_comm_backend(const Config& config, int64_t world_size,
                                           int64_t distinct_gpus);

}  // namespace trainer
