// Gradient reductions and the deduplicated global norm.
#include "parallel/grad_sync.h"

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
    runtime::ops::scale_inplace(grads.flat, 1.0f / static_cast<float>(dp), grads.flat.numel());
  }
}

double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage) {
  double sum = 0;
  const bool tp_leader = groups.tp->rank() == 0;
  for (const model::NamedParam& p : grads.named) {
    if (p.shard_dim < 0 && !tp_leader) continue;  // replicated over tp: one copy counts
    if (p.name == "embedding.word_embeddings.weight" && !has_embedding_stage) continue;
    sum += runtime::ops::sum_squares(p.tensor, p.tensor.numel());
  }
  groups.model_parallel->all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

}  // namespace parallel
