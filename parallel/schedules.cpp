// The no-pipeline schedule and data-parallel gradient averaging.
#include "parallel/schedules.h"

#include "runtime/kernels/cpu/elementwise.h"

namespace parallel {

double run_no_pipeline(recompute::ChunkExecutor& chunk, int64_t num_microbatches,
                       const std::function<recompute::Microbatch(int64_t)>& microbatch,
                       const recompute::StepInfo& step, float loss_scale) {
  double loss_sum = 0;
  for (int64_t mb = 0; mb < num_microbatches; ++mb) {
    loss_sum += chunk.forward_step(microbatch(mb), step);
    chunk.backward_step(loss_scale);
  }
  return loss_sum;
}

void average_gradients_over_dp(ProcessGroups& groups, float* grads, int64_t count) {
  const int size = groups.dp->size();
  if (size == 1) return;
  groups.dp->all_reduce_sum(grads, count);
  runtime::cpu::scale_inplace(grads, 1.0f / static_cast<float>(size), count);
}

}  // namespace parallel
