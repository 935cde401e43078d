// One pre-LN transformer layer, forward and backward op by op; backward is forward in exact
// reverse. A plan entry sets what the stash keeps (layer_stash.h); backward first rebuilds what
// a selective entry dropped, with the same kernels and keys, so every plan gives one gradient.
#pragma once

#include "model/gpt_params.h"
#include "model/layer_stash.h"

namespace model {

// Where this microbatch and layer sit in the global step (Note [Dropout RNG]).
struct LayerContext {
  int64_t layer = 0;  // global layer index
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t sample_offset = 0;    // global-batch index of local sample 0
  Tensor document_starts = {};  // (Tc, B) i32 of the rank's query rows, or empty: one document per
                                // sequence (Note [Document masking] in runtime/op_args.h)
  Tensor position_starts = {};  // the same starts with data.reset_position_ids, else empty: the
                                // positions run on (Note [Document positions])
};

// out (Ts, B, C) = layer(input); allocated by the caller, who knows whether the
// next consumer keeps it. Fills `stash` with the tensors `entry` keeps
// (category activation); everything else lives in workspace and is freed here.
void layer_forward(const Tensor& out, LayerStash& stash, const Tensor& input,
                   const LayerParams& weights, const LayerDims& dims, const LayerGroups& groups,
                   const LayerRecompute& entry, const LayerContext& context,
                   runtime::Allocator& allocator);

// Rebuilds the stash tensors a selective `entry` dropped: reruns the forward pieces that
// wrote them (model/recompute_modules.h), with forward's kernels and dropout keys, in
// forward order, into category activation. Nothing to do under `none`.
void layer_rebuild(LayerStash& stash, const LayerParams& weights, const LayerDims& dims,
                   const LayerGroups& groups, const LayerRecompute& entry,
                   const LayerContext& context, runtime::Allocator& allocator);

// Returns dinput (Ts, B, C) (=) and accumulates parameter gradients into `grads`
// (+=). Rebuilds the tensors `entry` dropped (layer_rebuild), then releases the whole stash.
Tensor layer_backward(LayerStash& stash, const Tensor& doutput, const LayerParams& weights,
                      const LayerParams& grads, const LayerDims& dims, const LayerGroups& groups,
                      const LayerRecompute& entry, const LayerContext& context,
                      runtime::Allocator& allocator);

}  // namespace model
