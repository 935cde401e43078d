// Matrix-multiply FLOPs of the model's ops (2 * M * N * K each). MFU counts
// model FLOPs (3 x forward: backward is twice forward); HFU adds the FLOPs
// that recompute spends rebuilding activations. Elementwise ops are not counted.
#pragma once

#include <cstdint>

#include "model/layer_stash.h"

namespace model {

struct LayerFlops {
  int64_t qkv = 0, scores = 0, context = 0, proj = 0, fc1 = 0, fc2 = 0;
  int64_t total() const { return qkv + scores + context + proj + fc1 + fc2; }
};

// Forward FLOPs of one layer for one microbatch (the full T x T attention
// products, as Megatron counts them; with a sliding window of W < T, T x W: what
// the window leaves of the model's work, whatever a backend computes and masks).
LayerFlops layer_forward_flops(const LayerDims& dims);
// Forward FLOPs of the output head (logits over the padded vocabulary).
int64_t head_forward_flops(const LayerDims& dims, int64_t padded_vocab);
// FLOPs a selective entry spends in backward rebuilding what it dropped: the matmuls of
// the forward pieces it reruns (model/recompute_modules.h), each once. Full layers are
// counted by their checkpoint group as one whole forward.
int64_t selective_recompute_flops(const LayerDims& dims, const LayerRecompute& entry);

}  // namespace model
