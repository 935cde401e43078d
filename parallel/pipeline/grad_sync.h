// After a step's backward: the gradient reductions every layout needs, in order
// (sequence-parallel partials over tp, tied word embeddings over the first and
// last stage, the average over dp), and the global gradient norm that counts
// tensor-parallel replicas and the tied copy once.
#pragma once

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"

namespace parallel {

void reduce_gradients(ProcessGroups& groups, const model::GptParams& grads,
                      bool sequence_parallel);

// sqrt(sum of squares of every gradient of the whole model), on every rank.
// The tied word embeddings count on the first stage only.
double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage);

}  // namespace parallel
