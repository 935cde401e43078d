// Operating a run (docs/operations.md): the run files (metrics.jsonl, events.jsonl) and the
// ledger's events, the divergence guard and rewind, target gates, drift, and early stops.
// Rules: every decision that changes what ranks do next (skip, rewind, stop) is taken from
// numbers all ranks share (the all-reduced loss and gradient norm, or one agreed collective).
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "trainer/checkpoint/format.h"
#include "trainer/run/train.h"
#include "trainer/util/version.h"

namespace trainer {

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::completed:
      return "completed";
    case StopReason::signal:
      return "signal";
    case StopReason::duration:
      return "duration";
    case StopReason::target_missed:
      return "target_missed";
    case StopReason::diverged:
      return "diverged";
  }
  return "unknown";
}

int exit_code(StopReason reason) {
  switch (reason) {
    case StopReason::target_missed:
      return kExitTargetMissed;
    case StopReason::diverged:
      return kExitDiverged;
    default:
      return 0;
  }
}

void Trainer::open_run_files() {
  recorder_.open(resumed_step_, start_event(), resume_event_);
}

void Trainer::record_event(const Event& event) {
  open_run_files();
  recorder_.record(event);
}

Event Trainer::start_event() const {
  const std::string yaml = to_yaml(config_);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, checkpoint::xxh64(yaml.data(), yaml.size()));
  std::string plan;
  for (const StageChunk& chunk : state_.setup.chunks) {
    if (!plan.empty()) plan += "; ";
    plan += describe_plan(chunk.plan);
  }
  const parallel::ParallelConfig& pc = config_.parallel;
  return Event("start", step_)
      .with("config_hash", std::string(hash))
      .with("version", std::string(version()))
      .with("git_revision", std::string(git_revision()))
      .with("world_size", groups_.world_size())
      .with("tensor", pc.tensor)
      .with("pipeline", pc.pipeline)
      .with("data", pc.data)
      .with("virtual_pipeline", pc.virtual_pipeline)
      .with("sequence_parallel", pc.sequence_parallel)
      .with("plan_rank0", plan)
      .with("predicted_activation_peak_bytes_rank0", state_.setup.predicted_activation_peak)
      .with("steps", config_.train.steps);
}

bool Trainer::guard_step(StepMetrics& m) {
  const TrainConfig& t = config_.train;
  const GuardAction action = t.guard.action;
  const SpikeCheck check = guard_.check(m.loss, m.grad_norm);
  if (check.nonfinite) {
    const std::string first = first_nonfinite_gradient();
    record_event(Event("non_finite", m.step)
                     .with("loss", m.loss)
                     .with("grad_norm", m.grad_norm)
                     .with("first_gradient_rank0", first));
  }
  const bool spike = check.nonfinite || (action != GuardAction::off && check.spike);
  if (!spike || (action == GuardAction::warn && !check.nonfinite)) {
    if (spike) {
      record_event(Event("loss_spike", m.step)
                       .with("loss", m.loss)
                       .with("median", check.median)
                       .with("factor", t.guard.loss_spike_factor)
                       .with("action", "warn"));
      if (groups_.is_logging_rank())
        log_ << "step " << m.step << ": loss " << m.loss << " > train.guard.loss_spike_factor "
             << t.guard.loss_spike_factor << " x median " << check.median << " (warn)\n";
    }
    skipped_in_a_row_ = 0;
    guard_.accept(m.loss);
    return true;
  }
  const std::string what =
      check.nonfinite
          ? TRAINER_STR("non-finite loss " << m.loss << " or gradient norm " << m.grad_norm)
          : TRAINER_STR("loss " << m.loss << " > train.guard.loss_spike_factor "
                                << t.guard.loss_spike_factor << " x median " << check.median);
  if (!check.nonfinite) {
    record_event(Event("loss_spike", m.step)
                     .with("loss", m.loss)
                     .with("median", check.median)
                     .with("factor", t.guard.loss_spike_factor)
                     .with("action", action == GuardAction::rewind ? "rewind" : "skip_step"));
  }
  if (action == GuardAction::rewind) {
    m.rewind = true;
    if (groups_.is_logging_rank()) log_ << "step " << m.step << ": " << what << "; rewinding\n";
    return false;
  }
  if (action == GuardAction::skip_step) {
    skip_update(m, what, "train.guard.action: skip_step");
    return false;
  }
  const std::string first = first_nonfinite_gradient();
  const std::string where = first.empty() ? "no gradient of this rank" : "gradient of " + first;
  const std::string message = TRAINER_STR("[rank " << groups_.world_rank << "] step " << m.step
                                                   << ": " << what << " (first: " << where << ")");
  if (t.on_nonfinite == OnNonfinite::stop) throw runtime::Error(message);
  skip_update(m, message, "train.on_nonfinite: skip_step");
  return false;
}

void Trainer::skip_update(const StepMetrics& m, const std::string& why, const char* setting) {
  const TrainConfig& t = config_.train;
  if (++skipped_in_a_row_ > t.max_skipped_steps) {
    throw runtime::Error(why + "; " + std::to_string(skipped_in_a_row_) +
                         " steps skipped in a row > train.max_skipped_steps " +
                         std::to_string(t.max_skipped_steps));
  }
  record_event(Event("skip_step", m.step)
                   .with("loss", m.loss)
                   .with("grad_norm", m.grad_norm)
                   .with("in_a_row", skipped_in_a_row_)
                   .with("setting", setting));
  if (groups_.is_logging_rank()) log_ << why << "; update skipped (" << setting << ")\n";
}

bool Trainer::rewind(const StepMetrics& m) {
  finish_checkpoints();
  const GuardConfig& guard = config_.train.guard;
  if (rewinds_ >= guard.max_rewinds) return false;
  TRAINER_ASSERT(last_checkpoint_step_, "rewind without a checkpoint");
  const int64_t to = *last_checkpoint_step_;
  const BatchRange window{.first = skipped_.batch_of_step(to + 1),
                          .last = skipped_.batch_of_step(m.step)};
  const int64_t rewinds = rewinds_ + 1;
  const std::string step_dir = config_.checkpoint.dir + "/" + checkpoint::step_dir_name(to);
  load_checkpoint_state(CheckpointReader(step_dir, ChecksumPolicy::verify_on_first_read), step_dir);
  rewinds_ = rewinds;
  skipped_in_a_row_ = 0;
  skipped_.add(window);
  const int64_t G = config_.train.global_batch_size;
  record_event(Event("rewind", m.step)
                   .with("loss", m.loss)
                   .with("to_step", to)
                   .with("checkpoint", step_dir)
                   .with("skipped_batches", std::vector<int64_t>{window.first, window.last})
                   .with("skipped_samples",
                         std::vector<int64_t>{window.first * G, (window.last + 1) * G - 1})
                   .with("rewinds", rewinds));
  recorder_.rewind_to(to);  // the lines after `to` are run again: each step stays once
  if (groups_.is_logging_rank()) {
    log_ << "rewind " << rewinds << "/" << guard.max_rewinds << ": back to step " << to << " from "
         << step_dir << ", skipping batches " << window.first << "-" << window.last << " (samples "
         << window.first * G << "-" << (window.last + 1) * G - 1 << ")\n";
    log_.flush();
  }
  return true;
}

std::vector<TargetMiss> Trainer::check_targets(const StepMetrics& m, bool first_of_process) {
  if (!gate_.enabled()) return {};
  const TargetMeasures mine = gate_.record(m, first_of_process);
  // One collective: every rank's measures in its slots, so all ranks decide alike.
  const int64_t n = groups_.world_size(), r = groups_.world_rank;
  std::vector<double> slots(static_cast<size_t>(3 * n), 0.0);
  slots[static_cast<size_t>(3 * r)] = mine.tokens_per_s;
  slots[static_cast<size_t>(3 * r + 1)] = mine.memory_gib;
  slots[static_cast<size_t>(3 * r + 2)] = mine.loss;
  groups_.world->all_reduce_sum(slots.data(), 3 * n);
  std::vector<TargetMeasures> ranks(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(3 * i);
    ranks[static_cast<size_t>(i)] = {slots[at], slots[at + 1], slots[at + 2]};
  }
  return gate_.new_misses(TargetGate::agree(ranks));
}

std::optional<std::string> Trainer::observe_step(const StepMetrics& m, bool first_of_process,
                                                 double seconds_per_step, bool stopping) {
  const TrainConfig& t = config_.train;
  if (groups_.is_logging_rank()) {
    recorder_.write_metrics(m);
    if (step_ % t.log_interval == 0 || step_ == t.steps || first_of_process || stopping ||
        m.val_loss) {
      log_step(m, seconds_per_step);
    }
    for (const Event& event : drift_.observe(m, first_of_process)) record_event(event);
  }
  const bool stops = config_.targets.action == TargetAction::checkpoint_and_stop;
  std::optional<std::string> stop;
  for (const TargetMiss& miss : check_targets(m, first_of_process)) {
    const char* action = stops ? "checkpoint_and_stop" : "warn";
    record_event(Event("target_miss", m.step)
                     .with("target", miss.target)
                     .with("measured", miss.measured)
                     .with("limit", miss.limit)
                     .with("action", action));
    if (groups_.is_logging_rank()) {
      log_ << "step " << m.step << ": target missed: targets." << miss.target << " " << miss.limit
           << ", measured " << miss.measured << " (" << action << ")\n";
    }
    if (stops && !stop) {
      stop = TRAINER_STR("stopped by targets." << miss.target << " " << miss.limit << " (measured "
                                               << miss.measured << ")");
    }
  }
  return stop;
}

TrainSummary Trainer::stop_run(TrainSummary summary, StopReason reason,
                               const std::string& message) {
  recorder_.write_trace(step_);
  if (!config_.checkpoint.dir.empty()) save_checkpoint();
  finish_checkpoints();
  record_event(Event("end", step_)
                   .with("reason", std::string(to_string(reason)))
                   .with("message", message)
                   .with("exit_code", static_cast<int64_t>(exit_code(reason))));
  if (groups_.is_logging_rank()) {
    log_ << message << " after step " << step_
         << (config_.checkpoint.dir.empty() ? " (no checkpoint.dir: nothing saved)"
                                            : "; checkpoint written to " + config_.checkpoint.dir)
         << "\n";
    log_.flush();
  }
  summary.stop = reason;
  summary.steps = step_;
  return summary;
}

}  // namespace trainer
