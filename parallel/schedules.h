// Pipeline schedules: they call the chunk's forward_step / backward_step over
// the step's microbatches and never look inside a layer. Plus the data-parallel
// gradient average.
#pragma once

#include <functional>

#include "parallel/process_groups.h"
#include "recompute/executor.h"

namespace parallel {

// No pipeline: forward then backward of each microbatch in turn (one in flight).
// Returns the sum of token losses over the microbatches.
double run_no_pipeline(recompute::ChunkExecutor& chunk, int64_t num_microbatches,
                       const std::function<recompute::Microbatch(int64_t)>& microbatch,
                       const recompute::StepInfo& step, float loss_scale);

// Averages the flat gradient buffer over the data-parallel group.
void average_gradients_over_dp(ProcessGroups& groups, float* grads, int64_t count);

}  // namespace parallel
