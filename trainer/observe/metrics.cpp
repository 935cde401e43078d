// metrics.jsonl writer: one line per step, appended after a resume.
#include "trainer/observe/metrics.h"


#include "runtime/error.h"
#include "trainer/observe/event_ledger.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {

MetricsWriter::MetricsWriter(const std::string& path, std::optional<int64_t> keep_through_step)
    : path_(path) {
  if (keep_through_step) keep_jsonl_through_step(path, *keep_through_step);
  out_.open(path, keep_through_step ? std::ios::app : std::ios::trunc);
  if (!out_) throw runtime::InputError("cannot write metrics file " + path);
}

void MetricsWriter::write(const StepMetrics& m) {
  JsonObjectWriter line;
  line.integer("step", m.step)
      .number("loss", m.loss)
      .number("lr", m.lr)
      .number("grad_norm", m.grad_norm)
      .number("tokens_per_s", m.tokens_per_s, "%.6g")
      .number("step_ms", m.step_ms, "%.6g")
      .number("predicted_step_ms", m.predicted_step_ms, "%.6g")
      .number("grad_reduce_wait_ms", m.grad_reduce_wait_ms, "%.6g")
      .number("grad_reduce_in_backward_ms", m.grad_reduce_in_backward_ms, "%.6g")
      .number("model_tflops", m.model_tflops, "%.6g")
      .number("hardware_tflops", m.hardware_tflops, "%.6g")
      .number("mfu_percent", m.mfu_percent, "%.6g")
      .number("hfu_percent", m.hfu_percent, "%.6g")
      .number("recompute_share", m.recompute_share)
      .integer("recompute_flops", m.recompute_flops)
      .integer("comm_bytes", m.comm_bytes)
      .integer("predicted_comm_bytes", m.predicted_comm_bytes);
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories)
    line.integer("peak_" + std::string(runtime::category_name(c)) + "_bytes", m.memory[c].peak);
  // The activation entry is the stash model's schedule peak (m.predicted_activation_peak).
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories)
    line.integer("predicted_" + std::string(runtime::category_name(c)) + "_peak_bytes",
                 m.predicted_memory[static_cast<size_t>(c)]);
  auto list = [&](const char* key, const std::vector<int64_t>& values) {
    if (values.size() >= 2) line.integers(key, values);
  };
  list("rank_peak_activation_bytes", m.rank_activation_peak);
  list("rank_predicted_activation_peak_bytes", m.rank_predicted_peak);
  list("rank_comm_bytes", m.rank_comm_bytes);
  list("rank_predicted_comm_bytes", m.rank_predicted_comm_bytes);
  list("rank_total_peak_bytes", m.rank_total_peak);
  list("rank_predicted_total_peak_bytes", m.rank_predicted_total_peak);
  if (m.val_loss) line.number("val_loss", *m.val_loss);
  for (const auto& [name, loss] : m.dataset_val_losses) line.number("val_loss/" + name, loss);
  if (m.update_skipped) line.boolean("update_skipped", true);
  out_ << line.text() << "\n";
  out_.flush();
  if (!out_) throw runtime::InputError("write failed on metrics file " + path_);
}

}  // namespace trainer
