// The ends of the GPT: token + position embedding with dropout (first stage)
// and final layernorm + tied output head + cross entropy (last stage). Each
// keeps a small named stash; parameter gradients accumulate (+=).
#pragma once

#include "model/gpt_config.h"
#include "model/layer.h"

namespace model {

// Ts = T / tp with sequence parallelism, else T; Vs = padded vocab / tp.
struct EmbeddingStash {
  Tensor tokens;           // (T, B) i32
  Tensor dropout_mask;     // (Ts, B, C) u8, with hidden dropout
  Tensor position_starts;  // (T, B) i32, the context's (Note [Document positions]), or empty
};

struct HeadStash {
  Tensor input;     // (Ts, B, C) final_layernorm input = last layer output
  Tensor lnf_mean;  // (Ts*B) f32
  Tensor lnf_rstd;  // (Ts*B) f32
  Tensor lnf_out;   // (T, B, C) head input (gathered over the sequence)
  Tensor logits;    // (T, B, Vs), activation dtype
  Tensor lse;       // (T*B) f32 logsumexp of each row's real logits (whole vocabulary)
  Tensor targets;   // (T, B) i32
};

// The two stash specs (model/stash_spec.h), read by the forwards when they allocate and by
// the memory model. The embedding keeps its stash for backward; the head when `keep` (not in
// evaluation). The tokens, the head's input and the targets are the caller's.
StashSpec<EmbeddingStash> embedding_stash_spec(const LayerDims& dims);
StashSpec<HeadStash> head_stash_spec(const GptConfig& config, const LayerDims& dims, bool keep);

// out (Ts, B, C) = dropout(wte[tokens] + wpe[position]); caller allocates out. The
// word lookup is vocab-parallel: shards sum (or reduce-scatter under SP) first.
void embedding_forward(const Tensor& out, EmbeddingStash& stash, const Tensor& tokens,
                       const GptParams& params, const GptConfig& config, const LayerDims& dims,
                       const LayerGroups& groups, const LayerContext& context,
                       runtime::Allocator& allocator);
// Accumulates dwte, dwpe from dout; releases the stash.
void embedding_backward(const GptParams& grads, const Tensor& dout, EmbeddingStash& stash,
                        const GptConfig& config, const LayerDims& dims, const LayerGroups& groups,
                        runtime::Allocator& allocator);

// Writes per-token losses (T*B) of the last layer's output `input` (kept in the
// stash when keep_for_backward, otherwise freed on return).
void head_forward(const Tensor& losses, HeadStash& stash, const Tensor& input,
                  const Tensor& targets, const GptParams& params, const GptConfig& config,
                  const LayerDims& dims, const LayerGroups& groups, bool keep_for_backward,
                  runtime::Allocator& allocator);
// d(sum of losses * loss_scale) / d(input): returns dinput (=); accumulates into
// dwte and the final layernorm's gradients; releases the stash.
Tensor head_backward(HeadStash& stash, const GptParams& params, const GptParams& grads,
                     const GptConfig& config, const LayerDims& dims, const LayerGroups& groups,
                     float loss_scale, runtime::Allocator& allocator);

}  // namespace model
