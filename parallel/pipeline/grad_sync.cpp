// Gradient reductions and the deduplicated global norm.
#include "parallel/pipeline/grad_sync.h"

#include <cmath>

#include "runtime/ops.h"

namespace parallel {

void reduce_gradients(ProcessGroups& groups, const model::GptParams& grads,
                      bool sequence_parallel) {
  if (sequence_parallel && groups.tp->size() > 1) {
    for (const model::NamedParam& p : grads.named) {
      if (p.sequence_parallel_partial) groups.tp->all_reduce_sum(p.tensor);
    }
  }
  if (groups.embedding != nullptr && grads.wte.defined()) {
    groups.embedding->all_reduce_sum(grads.wte);
  }
  const int dp = groups.dp->size();
  if (dp > 1) {
    groups.dp->all_reduce_sum(grads.flat);
    runtime::ops::scale_inplace({.x = grads.flat,
                                 .count = grads.flat.numel(),
                                 .scale = 1.0f / static_cast<float>(dp)});
  }
}

double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage) {
  // The counted tensors form runs of the flat buffer (usually one): one reduction per run,
  // as a device reduction synchronizes with the host.
  double sum = 0;
  const bool tp_leader = groups.tp->rank() == 0;
  int64_t offset = 0, run_begin = 0;
  auto finish_run = [&] {
    const int64_t n = offset - run_begin;
    if (n > 0) sum += runtime::ops::sum_squares({.x = grads.flat.view(run_begin, {n}), .count = n});
  };
  for (const model::NamedParam& p : grads.named) {
    const bool counted = (p.shard_dim >= 0 || tp_leader) &&  // tp replicas: one copy counts
                         (p.name != model::kWordEmbeddingsName || has_embedding_stage);
    if (!counted) {
      finish_run();
      run_begin = offset + p.tensor.numel();
    }
    offset += p.tensor.numel();
  }
  finish_run();
  groups.model_parallel->all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

}  // namespace parallel
