// One pre-LN transformer layer, forward and backward written out op by op
// (llm.c style). Backward is the exact reverse of forward. Which intermediate
// tensors survive forward is set by the layer's plan entry (layer_stash.h);
// backward first rebuilds what a selective entry dropped, with the same kernels
// and the same Philox keys, so gradients are bit-identical under every plan.
#pragma once

#include "model/gpt_params.h"
#include "model/layer_stash.h"

namespace model {

// Where this microbatch and layer sit in the global step (Note [Dropout RNG]).
struct LayerContext {
  int64_t layer = 0;          // global layer index
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t sample_offset = 0;  // global-batch index of local sample 0
};

// out (Ts, B, C) = layer(input); allocated by the caller, who knows whether the
// next consumer keeps it. Fills `stash` with the tensors `entry` keeps
// (category activation); everything else lives in workspace and is freed here.
void layer_forward(const Tensor& out, LayerStash& stash, const Tensor& input,
                   const LayerParams& weights, const LayerDims& dims, const LayerRecompute& entry,
                   const LayerContext& context, runtime::Allocator& allocator);

// Returns dinput (Ts, B, C) (=) and accumulates parameter gradients into `grads`
// (+=). Rebuilds the tensors `entry` dropped, then releases the whole stash.
Tensor layer_backward(LayerStash& stash, const Tensor& doutput, const LayerParams& weights,
                      const LayerParams& grads, const LayerDims& dims, const LayerRecompute& entry,
                      const LayerContext& context, runtime::Allocator& allocator);

}  // namespace model
