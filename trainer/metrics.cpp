// metrics.jsonl writer: one line per step, appended after a resume.
#include "trainer/metrics.h"

#include <cstdio>

#include "runtime/error.h"
#include "trainer/event_ledger.h"

namespace trainer {

MetricsWriter::MetricsWriter(const std::string& path, std::optional<int64_t> keep_through_step)
    : path_(path) {
  if (keep_through_step) keep_jsonl_through_step(path, *keep_through_step);
  out_.open(path, keep_through_step ? std::ios::app : std::ios::trunc);
  if (!out_) throw runtime::InputError("cannot write metrics file " + path);
}

void MetricsWriter::write(const StepMetrics& m) {
  char buffer[1024];
  std::snprintf(buffer, sizeof buffer,
                "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, "
                "\"tokens_per_s\": %.6g, \"step_ms\": %.6g, \"grad_reduce_wait_ms\": %.6g, "
                "\"grad_reduce_in_backward_ms\": %.6g, "
                "\"model_tflops\": %.6g, "
                "\"hardware_tflops\": %.6g, \"recompute_flops\": %lld, "
                "\"predicted_activation_peak_bytes\": %lld, \"comm_bytes\": %lld, "
                "\"predicted_comm_bytes\": %lld",
                static_cast<long long>(m.step), m.loss, m.lr, m.grad_norm, m.tokens_per_s,
                m.step_ms, m.grad_reduce_wait_ms, m.grad_reduce_in_backward_ms, m.model_tflops,
                m.hardware_tflops, static_cast<long long>(m.recompute_flops),
                static_cast<long long>(m.predicted_activation_peak),
                static_cast<long long>(m.comm_bytes),
                static_cast<long long>(m.predicted_comm_bytes));
  out_ << buffer;
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    out_ << ", \"peak_" << runtime::category_name(c) << "_bytes\": " << m.memory[c].peak;
  }
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    out_ << ", \"predicted_" << runtime::category_name(c)
         << "_peak_bytes\": " << m.predicted_memory[static_cast<size_t>(c)];
  }
  auto list = [&](const char* key, const std::vector<int64_t>& values) {
    if (values.size() < 2) return;
    out_ << ", \"" << key << "\": [";
    for (size_t i = 0; i < values.size(); ++i) out_ << (i ? ", " : "") << values[i];
    out_ << "]";
  };
  list("rank_peak_activation_bytes", m.rank_activation_peak);
  list("rank_predicted_activation_peak_bytes", m.rank_predicted_peak);
  list("rank_comm_bytes", m.rank_comm_bytes);
  list("rank_predicted_comm_bytes", m.rank_predicted_comm_bytes);
  list("rank_total_peak_bytes", m.rank_total_peak);
  list("rank_predicted_total_peak_bytes", m.rank_predicted_total_peak);
  if (m.val_loss) {
    std::snprintf(buffer, sizeof buffer, ", \"val_loss\": %.9g", *m.val_loss);
    out_ << buffer;
  }
  if (m.update_skipped) out_ << ", \"update_skipped\": true";
  out_ << "}\n";
  out_.flush();
  if (!out_) throw runtime::InputError("write failed on metrics file " + path_);
}

std::string format_bytes(int64_t bytes) {
  char buffer[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buffer, sizeof buffer, "%.1f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(buffer, sizeof buffer, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  return buffer;
}

}  // namespace trainer
