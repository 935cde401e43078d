// Guard, targets and drift: medians over windows, compared with thresholds.
#include "trainer/run/run_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/error.h"

namespace trainer {

RunningWindow::RunningWindow(int64_t capacity) : capacity_(capacity) {
  TRAINER_ASSERT(capacity >= 1, "window of " << capacity);
}

void RunningWindow::push(double value) {
  values_.push_back(value);
  if (static_cast<int64_t>(values_.size()) > capacity_) values_.pop_front();
}

void RunningWindow::assign(const std::vector<double>& values) {
  values_.clear();
  for (const double value : values) push(value);
}

double RunningWindow::median() const {
  TRAINER_ASSERT(!values_.empty(), "median of an empty window");
  std::vector<double> sorted(values_.begin(), values_.end());
  const size_t middle = (sorted.size() - 1) / 2;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(middle),
                   sorted.end());
  return sorted[middle];
}

SpikeCheck LossGuard::check(double loss, double grad_norm) const {
  SpikeCheck result;
  result.nonfinite = !std::isfinite(loss) || !std::isfinite(grad_norm);
  if (!losses_.empty()) result.median = losses_.median();
  result.spike =
      result.nonfinite || (losses_.full() && loss > config_.loss_spike_factor * result.median);
  return result;
}

std::string LossGuard::to_text() const {
  std::string text;
  char number[32];
  for (const double loss : losses_.values()) {
    std::snprintf(number, sizeof number, "%.17g", loss);
    if (!text.empty()) text += ',';
    text += number;
  }
  return text;
}

void LossGuard::assign_text(const std::string& text, const std::string& source) {
  std::vector<double> losses;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    losses.push_back(std::strtod(item.c_str(), &end));
    if (item.empty() || end != item.c_str() + item.size()) {
      throw runtime::InputError(source + ": malformed guard losses '" + text + "'");
    }
    at = comma + 1;
  }
  losses_.assign(losses);
}

TargetGate::TargetGate(const TargetsConfig& config)
    : config_(config), tokens_per_s_(config.window), losses_(config.window) {}

bool TargetGate::enabled() const {
  return config_.min_tokens_per_s > 0 || config_.max_memory_gib > 0 || config_.max_loss.at_step > 0;
}

TargetMeasures TargetGate::record(const StepMetrics& m, bool first_of_process) {
  if (!first_of_process && !m.update_skipped) tokens_per_s_.push(m.tokens_per_s);
  losses_.push(m.loss);
  TargetMeasures measures;
  if (tokens_per_s_.full()) measures.tokens_per_s = tokens_per_s_.median();
  int64_t bytes = 0;
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories) bytes += m.memory[c].peak;
  measures.memory_gib = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  if (m.step == config_.max_loss.at_step) measures.loss = losses_.median();
  return measures;
}

TargetMeasures TargetGate::agree(const std::vector<TargetMeasures>& ranks) {
  TRAINER_ASSERT(!ranks.empty(), "no ranks");
  TargetMeasures agreed = ranks[0];
  for (const TargetMeasures& r : ranks) {
    // The slowest rank decides; a rank whose window is not full yet (-1) does not count.
    if (r.tokens_per_s < 0 || agreed.tokens_per_s < 0) {
      agreed.tokens_per_s = std::max(agreed.tokens_per_s, r.tokens_per_s);
    } else {
      agreed.tokens_per_s = std::min(agreed.tokens_per_s, r.tokens_per_s);
    }
    agreed.memory_gib = std::max(agreed.memory_gib, r.memory_gib);
    if (std::isnan(r.loss) || r.loss > agreed.loss) agreed.loss = r.loss;
  }
  return agreed;
}

std::vector<TargetMiss> TargetGate::misses(const TargetMeasures& agreed) const {
  std::vector<TargetMiss> found;
  if (config_.min_tokens_per_s > 0 && agreed.tokens_per_s >= 0 &&
      agreed.tokens_per_s < config_.min_tokens_per_s) {
    found.push_back({"min_tokens_per_s", agreed.tokens_per_s, config_.min_tokens_per_s});
  }
  if (config_.max_memory_gib > 0 && agreed.memory_gib > config_.max_memory_gib) {
    found.push_back({"max_memory_gib", agreed.memory_gib, config_.max_memory_gib});
  }
  // A non-finite loss misses too (NaN compares false).
  if (config_.max_loss.at_step > 0 && agreed.loss != -1 &&
      !(agreed.loss <= config_.max_loss.value)) {
    found.push_back({"max_loss", agreed.loss, config_.max_loss.value});
  }
  return found;
}

std::vector<TargetMiss> TargetGate::new_misses(const TargetMeasures& agreed) {
  const std::vector<TargetMiss> now = misses(agreed);
  std::vector<TargetMiss> fresh;
  std::vector<std::string> missing;
  for (const TargetMiss& miss : now) {
    if (std::find(missing_.begin(), missing_.end(), miss.target) == missing_.end())
      fresh.push_back(miss);
    missing.push_back(miss.target);
  }
  missing_ = std::move(missing);
  return fresh;
}

std::vector<Event> DriftMonitor::observe(const StepMetrics& m, bool first_of_process) {
  std::vector<Event> events;
  if (config_.throughput_drift_fraction > 0 && !first_of_process && !m.update_skipped) {
    const bool below =
        tokens_.full() && m.tokens_per_s < config_.throughput_drift_fraction * tokens_.median();
    if (below && !drifting_) {
      events.push_back(Event("throughput_drift", m.step)
                           .with("tokens_per_s", m.tokens_per_s)
                           .with("running_median", tokens_.median())
                           .with("fraction", config_.throughput_drift_fraction));
    }
    drifting_ = below;
    tokens_.push(m.tokens_per_s);
  }
  // Every category's peaks summed against the whole-rank model's: per rank when gathered
  // (several ranks), else this rank's own numbers.
  const bool gathered = !m.rank_total_peak.empty();
  int64_t own = 0, own_predicted = 0;
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    own += m.memory[c].peak;
    own_predicted += m.predicted_memory[static_cast<size_t>(c)];
  }
  const std::vector<int64_t> measured = gathered ? m.rank_total_peak : std::vector<int64_t>{own};
  const std::vector<int64_t> predicted =
      gathered ? m.rank_predicted_total_peak : std::vector<int64_t>{own_predicted};
  reported_peak_.resize(measured.size(), 0);
  for (size_t rank = 0; rank < measured.size(); ++rank) {
    if (measured[rank] <= predicted[rank] || measured[rank] <= reported_peak_[rank]) continue;
    reported_peak_[rank] = measured[rank];
    events.push_back(Event("memory_drift", m.step, static_cast<int>(rank))
                         .with("category", "total")
                         .with("measured_bytes", measured[rank])
                         .with("predicted_bytes", predicted[rank]));
  }
  return events;
}

}  // namespace trainer
