// Per-step metrics: one JSON object per line in <run dir>/metrics.jsonl, written
// by the logging rank only, flushed every line so a killed run keeps its curve.
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/allocator.h"

namespace trainer {

struct StepMetrics {
  int64_t step = 0;  // 1-based
  double loss = 0;   // mean token loss of the batch this step trained on, before its update
  double lr = 0;
  double grad_norm = 0;  // before clipping
  double tokens_per_s = 0;
  double step_ms = 0;
  double predicted_step_ms = 0;  // the step-time model's (logging rank; trainer/planning)
  // Time this rank spent inside the step's gradient-reduction calls after backward (all of
  // them with optimizer.overlap_grad_reduce off; with it on, what backward left), and during
  // backward (reports and progress tests, overlap on).
  double grad_reduce_wait_ms = 0;
  double grad_reduce_in_backward_ms = 0;
  double model_tflops = 0;     // model FLOPs / time (MFU numerator), this rank
  double hardware_tflops = 0;  // (model + recompute FLOPs) / time (HFU numerator), this rank
  // model_tflops and hardware_tflops as percentages of the MFU denominator (the log line's
  // MFU and HFU), and recompute FLOPs / model FLOPs, this rank.
  double mfu_percent = 0, hfu_percent = 0;
  double recompute_share = 0;
  int64_t recompute_flops = 0;
  int64_t predicted_activation_peak = 0;
  int64_t comm_bytes = 0;  // payload this rank handed to its communicators during the step
  int64_t predicted_comm_bytes = 0;
  // Per world rank (filled on the logging rank): activation peak, predicted peak, comm bytes,
  // and every category's peaks summed, measured and predicted.
  std::vector<int64_t> rank_activation_peak, rank_predicted_peak, rank_comm_bytes,
      rank_predicted_comm_bytes, rank_total_peak, rank_predicted_total_peak;
  runtime::AllocatorStats memory;  // peaks of this step
  // The whole-rank memory model's peak of each category (trainer/planning/rank_memory.h).
  std::array<int64_t, runtime::kNumMemoryCategories> predicted_memory{};
  std::optional<double> val_loss;  // every dataset's validation loss, weighted by the blend
  // val_loss/<name> of each dataset of a blend of two or more, in blend order (evaluation steps).
  std::vector<std::pair<std::string, double>> dataset_val_losses;
  bool update_skipped = false;  // the update was dropped (non-finite, or a guard spike)
  bool rewind = false;          // train.guard asks the loop to rewind (update_skipped too)
};

class MetricsWriter {
 public:
  // Truncates `path` (a fresh run: nullopt), or keeps its lines through `keep_through_step`
  // (a resume or a rewind; keep_jsonl_through_step) and appends. InputError if unwritable.
  MetricsWriter(const std::string& path, std::optional<int64_t> keep_through_step);
  void write(const StepMetrics& metrics);

 private:
  std::string path_;
  std::ofstream out_;
};

// `tflops` as a percentage of a peak of `peak_gflops` GFLOP/s (MFU, HFU).
inline double percent_of_peak(double tflops, double peak_gflops) {
  return peak_gflops > 0 ? 100.0 * tflops * 1e3 / peak_gflops : 0.0;
}

// Columns of per-rank numbers the logging rank gathers each step: one sum over the world of
// 8-byte doubles, whose payload rank_metrics_payload_bytes states (a step's measured
// communication includes it).
inline constexpr int64_t kRankMetricColumns = 6;
inline int64_t rank_metrics_payload_bytes(int64_t world_size) {
  return world_size > 1 ? kRankMetricColumns * world_size * 8 : 0;
}

}  // namespace trainer
