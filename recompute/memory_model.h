// Predicts the peak of the `activation` memory category for a plan, from the
// same stash specs the layers, embedding and head allocate with (model/stash_spec.h). The
// prediction follows the executor's order of allocation exactly: forward keeps
// per plan; backward frees the head, then walks layers down, rebuilding one
// layer's dropped tensors (selective) or one group's full stashes (full).
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt_config.h"
#include "model/layer_stash.h"
#include "recompute/plan.h"

namespace recompute {

struct LayerMemory {
  int64_t kept = 0;        // bytes the layer keeps from forward to backward
  int64_t checkpoint = 0;  // bytes of its group's input when it starts a full group
  int64_t rebuilt = 0;     // bytes live only while its backward rebuilds (selective)
};

struct ActivationMemory {
  std::vector<LayerMemory> layers;
  int64_t embedding = 0;      // tokens and the embedding dropout mask
  int64_t documents = 0;      // the microbatch's document starts, held through its backward
  int64_t head = 0;           // final layernorm, logits, targets, last layer output
  int64_t forward_end = 0;    // one microbatch: everything kept at the end of forward
  int64_t backward_peak = 0;  // one microbatch: the largest point during backward
  int64_t peak = 0;           // with `in_flight` microbatches held at once
};

// `in_flight`: microbatches whose stashes are held at once (1 without a
// pipeline; up to min(pipeline - stage, microbatches) on a 1F1B stage). The
// embedding lives on the first pipeline stage, the head on the last; with documents
// (data.reset_attention_mask or data.reset_position_ids) every chunk holds a microbatch's
// (Tc, B) i32 starts.
ActivationMemory predict_activation_memory(const model::GptConfig& config,
                                           const model::LayerDims& dims, const RecomputePlan& plan,
                                           int64_t in_flight = 1, bool has_embedding = true,
                                           bool has_head = true, bool has_documents = false);

}  // namespace recompute
