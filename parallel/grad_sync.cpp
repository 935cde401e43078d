// Gradient reductions and the deduplicated global norm.
#include "parallel/grad_sync.h"

#include <cmath>

#include "runtime/kernels/cpu/elementwise.h"

namespace parallel {

void reduce_gradients(ProcessGroups& groups, const model::GptParams& grads,
                      bool sequence_parallel) {
  if (sequence_parallel && groups.tp->size() > 1) {
    for (const model::NamedParam& p : grads.named) {
      if (p.sequence_parallel_partial) groups.tp->all_reduce_sum(p.tensor.f32(), p.tensor.numel());
    }
  }
  if (groups.embedding != nullptr && grads.wte.defined()) {
    groups.embedding->all_reduce_sum(grads.wte.f32(), grads.wte.numel());
  }
  const int dp = groups.dp->size();
  if (dp > 1) {
    groups.dp->all_reduce_sum(grads.flat.f32(), grads.flat.numel());
    runtime::cpu::scale_inplace(grads.flat.f32(), 1.0f / static_cast<float>(dp), grads.flat.numel());
  }
}

double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage) {
  double sum = 0;
  const bool tp_leader = groups.tp->rank() == 0;
  for (const model::NamedParam& p : grads.named) {
    if (p.shard_dim < 0 && !tp_leader) continue;  // replicated over tp: one copy counts
    if (p.name == "embedding.word_embeddings.weight" && !has_embedding_stage) continue;
    sum += runtime::cpu::sum_squares(p.tensor.f32(), p.tensor.numel());
  }
  groups.model_parallel->all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

}  // namespace parallel
