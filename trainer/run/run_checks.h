// The checks that watch a run, as plain state machines fed one step at a time (no
// communication; the Trainer agrees on their inputs across ranks): the divergence guard, the
// target gates and the drift monitor (docs/operations.md). Each returns what it found.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/observe/event_ledger.h"
#include "trainer/observe/metrics.h"

namespace trainer {

// The last `capacity` values and their median.
class RunningWindow {
 public:
  explicit RunningWindow(int64_t capacity);
  void push(double value);
  void assign(const std::vector<double>& values);  // keeps the last `capacity`
  bool full() const { return static_cast<int64_t>(values_.size()) == capacity_; }
  bool empty() const { return values_.empty(); }
  double median() const;  // the lower median of an even count; asserts non-empty
  std::vector<double> values() const { return {values_.begin(), values_.end()}; }

 private:
  int64_t capacity_;
  std::deque<double> values_;
};

struct SpikeCheck {
  bool nonfinite = false;  // the loss or the gradient norm is NaN or infinite
  bool spike = false;      // nonfinite, or loss > factor x median (a full window)
  double median = 0;       // of the window (0 while it is empty)
};

// train.guard: the window holds the losses of applied steps.
class LossGuard {
 public:
  explicit LossGuard(const GuardConfig& config) : config_(config), losses_(config.window) {}
  SpikeCheck check(double loss, double grad_norm) const;
  void accept(double loss) { losses_.push(loss); }
  // The window as a checkpoint stores it ("%.17g" numbers, comma-separated), and back.
  std::string to_text() const;
  void assign_text(const std::string& text, const std::string& source);

 private:
  GuardConfig config_;
  RunningWindow losses_;
};

// One rank's view of the targets at a step; agreed across ranks by TargetGate::agree.
struct TargetMeasures {
  double tokens_per_s = -1;  // the window's median; -1 while the window is not full
  double memory_gib = 0;     // this step's sum of category peaks
  double loss = -1;          // the loss window's median at targets.max_loss.at_step, else -1
};

struct TargetMiss {
  std::string target;  // "min_tokens_per_s", "max_memory_gib", "max_loss"
  double measured = 0;
  double limit = 0;
};

class TargetGate {
 public:
  explicit TargetGate(const TargetsConfig& config);
  bool enabled() const;
  // Records a step; `first_of_process` steps (warm-up) stay out of the throughput window.
  TargetMeasures record(const StepMetrics& metrics, bool first_of_process);
  // The run's measures from every rank's (the slowest rank's tokens/s, the largest memory,
  // the loss), and what misses its target: the same on every rank given the same input.
  static TargetMeasures agree(const std::vector<TargetMeasures>& ranks);
  std::vector<TargetMiss> misses(const TargetMeasures& agreed) const;
  // misses(agreed) less the targets already missing at the previous call (one event per
  // miss, not one per step while it lasts).
  std::vector<TargetMiss> new_misses(const TargetMeasures& agreed);

 private:
  TargetsConfig config_;
  std::vector<std::string> missing_;
  RunningWindow tokens_per_s_;
  RunningWindow losses_;
};

// throughput_drift (tokens/s below a fraction of its running median; one event on entering
// the drift) and memory_drift (a rank's measured activation peak above the prediction; one
// event per rank and peak), from the logging rank's metrics.
class DriftMonitor {
 public:
  explicit DriftMonitor(const TargetsConfig& config) : config_(config), tokens_(config.window) {}
  std::vector<Event> observe(const StepMetrics& metrics, bool first_of_process);

 private:
  TargetsConfig config_;
  RunningWindow tokens_;
  bool drifting_ = false;
  std::vector<int64_t> reported_peak_;  // per rank: the largest peak reported so far
};

}  // namespace trainer
