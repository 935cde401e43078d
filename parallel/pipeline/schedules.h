// Pipeline schedules: they call the chunks' forward_step / backward_step over
// the step's microbatches and move activations and their gradients between
// stages; they never look inside a layer. Sends are asynchronous and receives
// block, so every schedule below is free of deadlock as long as each rank runs
// its own op list in order. Also the data-parallel gradient average.
#pragma once

#include <functional>
#include <vector>

#include "parallel/core/process_groups.h"
#include "recompute/executor.h"
#include "recompute/memory_model.h"

namespace parallel {

enum class ScheduleKind { no_pipeline, one_f_one_b, interleaved };

// One rank's part of a training (or evaluation) step.
struct PipelineStep {
  std::vector<recompute::ChunkExecutor*> chunks;  // this rank's model chunks, virtual stage order
  Communicator* pp = nullptr;                     // the pipeline group: rank = stage
  int64_t num_microbatches = 1;
  // The data of microbatch `mb` for chunk `chunk` (tokens only where the chunk
  // has the embedding, targets only where it has the head).
  std::function<recompute::Microbatch(int64_t mb, int64_t chunk)> microbatch;
  recompute::StepInfo step;
  float loss_scale = 1.f;
  // Told where the gradients stand during the step's backwards (each chunk's last backward
  // reports its pieces final); null: nobody listens.
  recompute::GradientListener* gradients = nullptr;
};

// An op of a rank's list: forward or backward of microbatch `mb` on chunk `chunk`.
struct ScheduleOp {
  bool forward;
  int64_t microbatch;
  int64_t chunk;
  bool operator==(const ScheduleOp&) const = default;
};

// The op list of pipeline stage `stage` (Megatron's 1F1B and interleaved 1F1B).
// Interleaving needs num_microbatches % stages == 0.
std::vector<ScheduleOp> schedule_ops(ScheduleKind kind, int64_t stages, int64_t stage,
                                     int64_t chunks, int64_t num_microbatches);

// The peak of the `activation` category on this stage over its op list, given
// each chunk's memory model (one microbatch's forward end and backward peak).
int64_t predict_activation_peak(const std::vector<ScheduleOp>& ops,
                                const std::vector<recompute::ActivationMemory>& chunks);

// Runs a training step; returns the sum of token losses on the last stage, 0 elsewhere.
double run_schedule(ScheduleKind kind, const PipelineStep& step);
// Forward of every microbatch without dropout; returns the loss sum on the last stage.
double run_evaluation(const PipelineStep& step);

}  // namespace parallel
