// One transformer layer's forward and backward, on the backend of its tensors. Rules:
// activation gradients are assigned (=) except the residual stream's, which the layernorms'
// backward adds into (+=); parameter gradients accumulate (+=); the stash comes from its spec.
#include "model/layer.h"

#include <cmath>

#include "model/recompute_modules.h"
#include "model/tensor_parallel_linear.h"
#include "parallel/core/ring_attention.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"
#include "runtime/trace.h"

namespace model {
namespace {

namespace ops = runtime::ops;
using runtime::DropoutOp;

// Temporaries of the activations' type (f32 on the host, bf16 on a device) per query head
// (B, H, T, last) and per key/value head; those of hidden states are
// model/tensor_parallel_linear.h's. `name`: the tensor's in a memory timeline.
Tensor per_head(const LayerDims& d, int64_t last, runtime::Allocator& allocator, const char* name) {
  const runtime::memory_timeline::Name timeline_name(name);
  return Tensor::empty(allocator, {d.micro_batch, d.heads, d.seq, last}, d.activation_dtype,
                       runtime::MemoryCategory::workspace);
}
Tensor per_kv_head(const LayerDims& d, runtime::Allocator& allocator,
                   const char* name) {  // (B, Hkv, T, D)
  const runtime::memory_timeline::Name timeline_name(name);
  return Tensor::empty(allocator, {d.micro_batch, d.kv_heads(), d.seq, d.head_dim},
                       d.activation_dtype, runtime::MemoryCategory::workspace);
}

runtime::DropoutKey key(const LayerContext& c, DropoutOp op) {
  return runtime::make_dropout_key(c.seed, static_cast<uint64_t>(c.step),
                                   static_cast<uint32_t>(c.layer), op);
}

// A layernorm on the residual stream feeding a column-parallel linear: the input side of
// attention and of the MLP. Forward and backward of both read the stash and the weights
// (and the gradients, of the same layout) through one of these.
struct NormedLinear {
  Tensor LayerStash::*input;       // (Ts, B, C) layernorm input
  Tensor LayerStash::*mean;        // (Ts*B) f32
  Tensor LayerStash::*rstd;        // (Ts*B) f32
  Tensor LayerStash::*normalized;  // (Ts, B, C) layernorm output: the linear's input shard
  Tensor LayerParams::*ln_weight;
  Tensor LayerParams::*ln_bias;
  Tensor LayerParams::*weight;  // (out_features, C)
  Tensor LayerParams::*bias;
};
constexpr NormedLinear kInputLayernormQkv{&LayerStash::input,       &LayerStash::ln1_mean,
                                          &LayerStash::ln1_rstd,    &LayerStash::ln1_out,
                                          &LayerParams::ln1_weight, &LayerParams::ln1_bias,
                                          &LayerParams::qkv_weight, &LayerParams::qkv_bias};
constexpr NormedLinear kPreMlpLayernormFc1{&LayerStash::residual,    &LayerStash::ln2_mean,
                                           &LayerStash::ln2_rstd,    &LayerStash::ln2_out,
                                           &LayerParams::ln2_weight, &LayerParams::ln2_bias,
                                           &LayerParams::fc1_weight, &LayerParams::fc1_bias};

// --- forward pieces: forward runs them; backward reruns the ones a plan entry dropped -------

// The block's normalization: LayerNorm (mean, rstd, bias) or RMSNorm (rstd only).
void layernorm_forward(LayerStash& s, const LayerParams& w, const NormedLinear& block,
                       const LayerDims& d) {
  if (!d.features.layernorm()) {
    ops::rmsnorm_forward({.out = s.*block.normalized,
                          .rstd = s.*block.rstd,
                          .input = s.*block.input,
                          .weight = w.*block.ln_weight,
                          .rows = d.seq_shard() * d.micro_batch,
                          .channels = d.hidden,
                          .eps = d.layernorm_eps});
    return;
  }
  ops::layernorm_forward({.out = s.*block.normalized,
                          .mean = s.*block.mean,
                          .rstd = s.*block.rstd,
                          .input = s.*block.input,
                          .weight = w.*block.ln_weight,
                          .bias = w.*block.ln_bias,
                          .rows = d.seq_shard() * d.micro_batch,
                          .channels = d.hidden,
                          .eps = d.layernorm_eps});
}

// Rotary positions on the q and k heads of qkv (T, B, qkv_width), in place, one call per run of
// consecutive global positions (Note [Context chunks]), restarting at each document with
// position starts (Note [Document positions]); `backward` rotates a gradient back.
void rope(const Tensor& qkv, const LayerDims& d, const LayerContext& c, bool backward) {
  if (!d.features.rope) return;
  for (const parallel::RowSegment& run : d.context().segments(0, d.seq)) {
    // RopeForward and RopeBackward: the same fields in the same order (tensor, sizes, place).
    auto args = [&]<class Args>(Args) {
      return Args{qkv.rows(run.row, run.rows),
                  run.rows,
                  d.micro_batch,
                  d.kv_heads(),
                  d.features.group_size,
                  d.head_dim,
                  run.position,
                  d.features.rotary_base,
                  d.features.rope_scaling,
                  runtime::optional_rows(c.position_starts, run.row, run.rows)};
    };
    if (backward) {
      ops::rope_backward(args(runtime::ops::RopeBackward{}));
    } else {
      ops::rope_forward(args(runtime::ops::RopeForward{}));
    }
  }
}

// The q and k heads of this layer's qkv (T, B, qkv_width) (Note [Query and key norms]).
runtime::ops::QkNormHeads qk_norm_heads(const LayerDims& d) {
  return {d.seq * d.micro_batch, d.kv_heads(), d.features.group_size, d.head_dim};
}

// The q and k heads of qkv replaced by their norms, in place; the stash keeps the heads before
// and their rstd.
void qk_norm_forward(LayerStash& s, const LayerParams& w, const Tensor& qkv, const LayerDims& d) {
  if (!d.features.qk_norm) return;
  ops::qk_norm_forward({.qkv = qkv,
                        .input = s.qk_input,
                        .rstd = s.qk_rstd,
                        .q_weight = w.q_norm_weight,
                        .k_weight = w.k_norm_weight,
                        .heads = qk_norm_heads(d),
                        .eps = d.layernorm_eps});
}

// probs = causal_softmax(q k^T / sqrt(D)); with attention dropout also mask, probs_drop.
void core_attn_probs_forward(LayerStash& s, const LayerDims& d, const LayerContext& c) {
  const int64_t BH = d.micro_batch * d.heads, T = d.seq;
  ops::attention_scores_forward({.scores = s.probs,
                                 .q = s.q,
                                 .k = s.k,
                                 .batch_heads = BH,
                                 .seq = T,
                                 .head_dim = d.head_dim,
                                 .scale = d.attention_scale(),
                                 .group_size = d.features.group_size});
  ops::causal_softmax_forward({.probs = s.probs,
                               .scores = s.probs,
                               .batch_heads = BH,
                               .seq = T,
                               .window = d.features.window,
                               .document_starts = c.document_starts,
                               .micro_batch = d.micro_batch});
  if (d.attention_dropout > 0.f) {
    ops::dropout_attention_forward({.out = s.probs_drop,
                                    .mask = s.attn_mask,
                                    .input = s.probs,
                                    .micro_batch = d.micro_batch,
                                    .heads = d.heads,
                                    .seq = T,
                                    .head_offset = d.head_offset(),
                                    .sample_offset = c.sample_offset,
                                    .drop_probability = d.attention_dropout,
                                    .key = key(c, DropoutOp::attention_probs)});
  }
}

const Tensor& context_input(const LayerStash& s, const LayerDims& d) {
  return d.attention_dropout > 0.f ? s.probs_drop : s.probs;
}

// The flash kernels' sizes and dropout coordinates: those dropout_attention_forward uses.
runtime::FlashAttentionDims flash_dims(const LayerDims& d, const LayerContext& c) {
  return {.seq_len = d.seq,
          .micro_batch = d.micro_batch,
          .heads = d.heads,
          .head_dim = d.head_dim,
          .head_offset = d.head_offset(),
          .sample_offset = c.sample_offset,
          .scale = d.attention_scale(),
          .dropout_prob = d.attention_dropout,
          .dropout_key = key(c, DropoutOp::attention_probs),
          .group_size = d.features.group_size,
          .window = d.features.window};
}

// ctx (T, B, H*D) = attention(qkv), and its row log-sum-exp lse (B, H, T), in one pass; under
// context parallelism around the ring (parallel/core/ring_attention.h).
void flash_attention_forward(LayerStash& s, const LayerDims& d, const LayerGroups& groups,
                             const LayerContext& c, runtime::Allocator& allocator) {
  if (d.cp_size > 1) {
    parallel::ring_attention_forward(*groups.cp,
                                     {.ctx = s.ctx,
                                      .lse = s.lse,
                                      .qkv = s.qkv,
                                      .dims = flash_dims(d, c),
                                      .shard = d.context(),
                                      .document_starts = c.document_starts},
                                     allocator);
    return;
  }
  ops::flash_attention_forward({.ctx = s.ctx,
                                .lse = s.lse,
                                .qkv = s.qkv,
                                .dims = flash_dims(d, c),
                                .document_starts = c.document_starts});
}

// ctx (T, B, H*D) = core attention of qkv (T, B, qkv_width), which it consumes (releases). Unfused:
// per-head q, k, v, the probabilities and the context products; flash: one fused pass.
void core_attn_forward(LayerStash& s, Tensor& qkv, const LayerDims& d, const LayerGroups& groups,
                       const LayerContext& c, runtime::Allocator& allocator) {
  if (d.features.flash()) {
    flash_attention_forward(s, d, groups, c, allocator);  // ctx, lse; qkv is the stash's own
    qkv = Tensor();
    return;
  }
  const int64_t T = d.seq, B = d.micro_batch, H = d.heads, D = d.head_dim;
  ops::split_qkv_heads(  // q (B, H, T, D), k, v (B, Hkv, T, D)
      {.q = s.q,
       .k = s.k,
       .v = s.v,
       .qkv = qkv,
       .seq = T,
       .micro_batch = B,
       .heads = H,
       .head_dim = D,
       .group_size = d.features.group_size});
  qkv = Tensor();
  core_attn_probs_forward(s, d, c);                           // probs (B, H, T, T)
  Tensor ctx_heads = per_head(d, D, allocator, "ctx_heads");  // (B, H, T, D)
  ops::attention_context_forward({.ctx_heads = ctx_heads,
                                  .probs = context_input(s, d),
                                  .v = s.v,
                                  .batch_heads = B * H,
                                  .seq = T,
                                  .head_dim = D,
                                  .group_size = d.features.group_size});
  ops::merge_heads(  // ctx (T, B, H*D)
      {.ctx = s.ctx,
       .ctx_heads = ctx_heads,
       .seq = T,
       .micro_batch = B,
       .heads = H,
       .head_dim = D});
}

void fc1_forward(LayerStash& s, const LayerParams& w, const LayerDims& d, const LayerGroups& groups,
                 runtime::Allocator& allocator) {
  column_parallel_linear(s.fc1_out, s.ln2_out, w.fc1_weight, w.fc1_bias, d.fc1_width(), d, groups,
                         allocator);
}

void act_forward(LayerStash& s, const LayerDims& d) {
  if (d.features.swiglu) {
    ops::swiglu_forward(
        {.out = s.gelu_out, .input = s.fc1_out, .rows = d.seq * d.micro_batch, .ffn = d.ffn});
    return;
  }
  ops::gelu_forward(
      {.out = s.gelu_out, .input = s.fc1_out, .count = s.fc1_out.numel(), .kind = d.features.gelu});
}

// out = x + dropout(y) on hidden states, one fused op when there is dropout (y is left as is);
// one call per run of consecutive positions (Note [Context chunks]).
void dropout_add(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& mask,
                 const LayerDims& d, const LayerContext& c, DropoutOp op) {
  if (d.hidden_dropout == 0.f) {
    ops::add({.out = out, .a = x, .b = y, .count = out.numel()});
    return;
  }
  for (const parallel::RowSegment& run : d.shard_segments()) {
    const auto rows = [&](const Tensor& t) { return t.rows(run.row, run.rows); };
    ops::dropout_add_hidden_forward({.out = rows(out),
                                     .mask = rows(mask),
                                     .residual = rows(x),
                                     .input = rows(y),
                                     .seq = run.rows,
                                     .micro_batch = d.micro_batch,
                                     .channels = d.hidden,
                                     .seq_offset = run.position,
                                     .sample_offset = c.sample_offset,
                                     .drop_probability = d.hidden_dropout,
                                     .key = key(c, op)});
  }
}

// Runs a forward piece again, writing the stash tensors it rebuilds.
void rerun(ForwardPiece piece, LayerStash& s, const LayerParams& w, const LayerDims& d,
           const LayerGroups& groups, const LayerContext& c, runtime::Allocator& allocator) {
  switch (piece) {
    case ForwardPiece::input_layernorm:
      return layernorm_forward(s, w, kInputLayernormQkv, d);
    case ForwardPiece::core_attn_probs:
      return core_attn_probs_forward(s, d, c);
    case ForwardPiece::flash_attention:
      return flash_attention_forward(s, d, groups, c, allocator);
    case ForwardPiece::pre_mlp_layernorm:
      return layernorm_forward(s, w, kPreMlpLayernormFc1, d);
    case ForwardPiece::fc1:
      return fc1_forward(s, w, d, groups, allocator);
    case ForwardPiece::act:
      return act_forward(s, d);
  }
}

// --- backward pieces, each the reverse of the forward code it names --------------------

// dropout_add for y: returns dy, dout through the dropout mask in a new tensor, or dout itself
// without hidden dropout (read only: its owner adds to it only after dy's last reader).
// (x's gradient is dout itself: the residual stream carries it on.)
Tensor dropout_add_backward(const Tensor& dout, const Tensor& mask, const LayerDims& d,
                            runtime::Allocator& allocator, const char* name) {
  if (d.hidden_dropout == 0.f) return dout;
  Tensor dy = sequence_shard(d, d.hidden, allocator, name);
  ops::dropout_backward({.dinput = dy,
                         .dout = dout,
                         .mask = mask,
                         .count = dy.numel(),
                         .drop_probability = d.hidden_dropout});
  return dy;
}

// Whether layernorm_linear_backward takes the linear's bias gradient, or an op before it did.
enum class LinearBiasGrad { here, taken };

// A NormedLinear (layernorm, then column-parallel linear): the linear's input gradient back
// to this rank's rows, then the layernorm's input gradient added into dresidual (+=).
// Parameter gradients go to g (+=). Releases dout once the linear's backward has read it.
void layernorm_linear_backward(const Tensor& dresidual, Tensor& dout, const LayerStash& s,
                               const LayerParams& w, const LayerParams& g,
                               const NormedLinear& block, int64_t out_features, const LayerDims& d,
                               const LayerGroups& groups, runtime::Allocator& allocator,
                               LinearBiasGrad bias_grad = LinearBiasGrad::here) {
  // The column-parallel linear in reverse; its input and input gradient over the full sequence
  // stay alive through the layernorm's backward (the memory model counts them there).
  Tensor dnormalized_full = full_sequence(d, d.hidden, allocator, "dnormalized_full");
  const Tensor normalized_full = column_parallel_input(s.*block.normalized, d, groups, allocator);
  ops::linear_backward({.dinput = dnormalized_full,
                        .dweight = g.*block.weight,
                        .dbias = bias_grad == LinearBiasGrad::here ? g.*block.bias : Tensor(),
                        .dout = dout,
                        .input = normalized_full,
                        .weight = w.*block.weight,
                        .rows = d.seq * d.micro_batch,
                        .in_features = d.hidden,
                        .out_features = out_features});
  dout = Tensor();
  const Tensor dnormalized = column_parallel_input_grad(dnormalized_full, d, groups, allocator);
  if (!d.features.layernorm()) {
    ops::rmsnorm_backward({.dinput = dresidual,
                           .dweight = g.*block.ln_weight,
                           .dout = dnormalized,
                           .input = s.*block.input,
                           .weight = w.*block.ln_weight,
                           .rstd = s.*block.rstd,
                           .rows = d.seq_shard() * d.micro_batch,
                           .channels = d.hidden});
    return;
  }
  ops::layernorm_backward({.dinput = dresidual,
                           .dweight = g.*block.ln_weight,
                           .dbias = g.*block.ln_bias,
                           .dout = dnormalized,
                           .input = s.*block.input,
                           .weight = w.*block.ln_weight,
                           .mean = s.*block.mean,
                           .rstd = s.*block.rstd,
                           .rows = d.seq_shard() * d.micro_batch,
                           .channels = d.hidden});
}

// fc2's row_parallel_linear and act_forward, in reverse, in one op (Note [MLP epilogues]):
// returns dffn (T, B, F) = d(gelu_out) * gelu'(fc1_out) (=); fc2's dweight, dbias and fc1's
// dbias (the column sums of dffn) go to g (+=).
Tensor fc2_act_backward(const Tensor& dout, const LayerStash& s, const LayerParams& w,
                        const LayerParams& g, const LayerDims& d, const LayerGroups& groups,
                        runtime::Allocator& allocator) {
  Tensor dffn = full_sequence(d, d.ffn, allocator, "dffn");
  const Tensor dout_full = row_parallel_output_grad(dout, d, groups, allocator);
  ops::gelu_linear_backward({.dinput = dffn,
                             .dweight = g.fc2_weight,
                             .dbias = g.fc2_bias,
                             .pre_bias = g.fc1_bias,
                             .dout = dout_full,
                             .input = s.gelu_out,
                             .weight = w.fc2_weight,
                             .pre_activation = s.fc1_out,
                             .rows = d.seq * d.micro_batch,
                             .in_features = d.ffn,
                             .out_features = d.hidden,
                             .kind = d.features.gelu});
  return dffn;
}

// fc2's row_parallel_linear and the SwiGLU, in reverse: returns dfc1 (T, B, 2F) (=), the
// gradient of [gate | up]; fc2's dweight, dbias go to g (+=).
Tensor fc2_swiglu_backward(const Tensor& dout, const LayerStash& s, const LayerParams& w,
                           const LayerParams& g, const LayerDims& d, const LayerGroups& groups,
                           runtime::Allocator& allocator) {
  Tensor dact =
      row_parallel_linear_backward(g.fc2_weight, g.fc2_bias, dout, s.gelu_out, w.fc2_weight, d.ffn,
                                   d, groups, allocator);  // (T, B, F)
  Tensor dfc1 = full_sequence(d, d.fc1_width(), allocator, "dfc1");
  ops::swiglu_backward({.dinput = dfc1,
                        .dout = dact,
                        .input = s.fc1_out,
                        .rows = d.seq * d.micro_batch,
                        .ffn = d.ffn});
  return dfc1;
}

// core_attn_probs_forward: dq, dk (=) from dprobs, which it overwrites on the way.
// qk_norm_forward in reverse, in place on dqkv; the weights' gradients go to g (+=).
void qk_norm_backward(const Tensor& dqkv, const LayerStash& s, const LayerParams& w,
                      const LayerParams& g, const LayerDims& d) {
  if (!d.features.qk_norm) return;
  ops::qk_norm_backward({.dqkv = dqkv,
                         .dq_weight = g.q_norm_weight,
                         .dk_weight = g.k_norm_weight,
                         .input = s.qk_input,
                         .rstd = s.qk_rstd,
                         .q_weight = w.q_norm_weight,
                         .k_weight = w.k_norm_weight,
                         .heads = qk_norm_heads(d)});
}

void core_attn_probs_backward(const Tensor& dq, const Tensor& dk, const Tensor& dprobs,
                              const LayerStash& s, const LayerDims& d, const LayerContext& c) {
  const int64_t BH = d.micro_batch * d.heads, T = d.seq;
  if (d.attention_dropout > 0.f) {
    ops::dropout_backward({.dinput = dprobs,
                           .dout = dprobs,
                           .mask = s.attn_mask,
                           .count = dprobs.numel(),
                           .drop_probability = d.attention_dropout});
  }
  ops::causal_softmax_backward({.dscores = dprobs,
                                .dprobs = dprobs,
                                .probs = s.probs,
                                .batch_heads = BH,
                                .seq = T,
                                .window = d.features.window,
                                .document_starts = c.document_starts,
                                .micro_batch = d.micro_batch});
  ops::attention_scores_backward({.dq = dq,
                                  .dk = dk,
                                  .dscores = dprobs,
                                  .q = s.q,
                                  .k = s.k,
                                  .batch_heads = BH,
                                  .seq = T,
                                  .head_dim = d.head_dim,
                                  .scale = d.attention_scale(),
                                  .group_size = d.features.group_size});
}

// core_attn_forward: returns dqkv (T, B, qkv_width) (=) from dctx, which it consumes (releases).
Tensor core_attn_backward(Tensor& dctx, const LayerStash& s, const LayerDims& d,
                          const LayerGroups& groups, const LayerContext& c,
                          runtime::Allocator& allocator) {
  const int64_t T = d.seq, B = d.micro_batch, H = d.heads, D = d.head_dim;
  if (d.features.flash()) {
    Tensor dqkv = full_sequence(d, d.qkv_width(), allocator, "dqkv");
    if (d.cp_size > 1) {
      parallel::ring_attention_backward(*groups.cp,
                                        {.dqkv = dqkv,
                                         .dctx = dctx,
                                         .qkv = s.qkv,
                                         .ctx = s.ctx,
                                         .lse = s.lse,
                                         .dims = flash_dims(d, c),
                                         .shard = d.context(),
                                         .document_starts = c.document_starts},
                                        allocator);
    } else {
      ops::flash_attention_backward({.dqkv = dqkv,
                                     .dctx = dctx,
                                     .qkv = s.qkv,
                                     .ctx = s.ctx,
                                     .lse = s.lse,
                                     .dims = flash_dims(d, c),
                                     .document_starts = c.document_starts});
    }
    dctx = Tensor();
    return dqkv;
  }
  Tensor dctx_heads = per_head(d, D, allocator, "dctx_heads");
  ops::split_heads({.ctx_heads = dctx_heads,
                    .ctx = dctx,
                    .seq = T,
                    .micro_batch = B,
                    .heads = H,
                    .head_dim = D});
  dctx = Tensor();
  Tensor dprobs = per_head(d, T, allocator, "dprobs");
  Tensor dq = per_head(d, D, allocator, "dq"), dk = per_kv_head(d, allocator, "dk");
  Tensor dv = per_kv_head(d, allocator, "dv");
  ops::attention_context_backward({.dprobs = dprobs,
                                   .dv = dv,
                                   .dctx_heads = dctx_heads,
                                   .probs = context_input(s, d),
                                   .v = s.v,
                                   .batch_heads = B * H,
                                   .seq = T,
                                   .head_dim = D,
                                   .group_size = d.features.group_size});
  dctx_heads = Tensor();
  core_attn_probs_backward(dq, dk, dprobs, s, d, c);
  dprobs = Tensor();
  Tensor dqkv = full_sequence(d, d.qkv_width(), allocator, "dqkv");
  ops::merge_qkv_heads({.dqkv = dqkv,
                        .dq = dq,
                        .dk = dk,
                        .dv = dv,
                        .seq = T,
                        .micro_batch = B,
                        .heads = H,
                        .head_dim = D,
                        .group_size = d.features.group_size});
  return dqkv;
}

}  // namespace

void layer_forward(const Tensor& out, LayerStash& s, const Tensor& input, const LayerParams& w,
                   const LayerDims& d, const LayerGroups& groups, const LayerRecompute& entry,
                   const LayerContext& c, runtime::Allocator& allocator) {
  const StashMaker<LayerStash> maker(layer_stash_spec(d, entry), allocator);
  const int64_t HD = d.heads * d.head_dim;
  maker.make_all(s);
  s.input = input;

  // attention: residual = input + dropout(proj(core_attn(rope(qk_norm(qkv(ln1(input)))))))
  layernorm_forward(s, w, kInputLayernormQkv, d);  // ln1_out (Ts, B, C)
  // (T, B, qkv_width): the flash stash keeps it; the unfused attention splits it into q, k, v
  Tensor qkv = d.features.flash() ? s.qkv : full_sequence(d, d.qkv_width(), allocator, "qkv");
  column_parallel_linear(qkv, s.ln1_out, w.qkv_weight, w.qkv_bias, d.qkv_width(), d, groups,
                         allocator);
  qk_norm_forward(s, w, qkv, d);
  rope(qkv, d, c, /*backward=*/false);  // rotated q and k: what attention and its stash read
  core_attn_forward(s, qkv, d, groups, c, allocator);  // ctx (T, B, H*D)
  Tensor proj = row_parallel_linear(s.ctx, w.proj_weight, w.proj_bias, HD, d, groups, allocator);
  dropout_add(s.residual, input, proj, s.attn_out_mask, d, c, DropoutOp::attention_out);
  proj = Tensor();

  // mlp: out = residual + dropout(fc2(act(fc1(ln2(residual)))))
  layernorm_forward(s, w, kPreMlpLayernormFc1, d);  // ln2_out (Ts, B, C)
  fc1_forward(s, w, d, groups, allocator);          // fc1_out (T, B, F)
  act_forward(s, d);                                // gelu_out (T, B, F)
  Tensor fc2 =
      row_parallel_linear(s.gelu_out, w.fc2_weight, w.fc2_bias, d.ffn, d, groups, allocator);
  dropout_add(out, s.residual, fc2, s.mlp_out_mask, d, c, DropoutOp::mlp_out);

  maker.release_dropped(s);
}

void layer_rebuild(LayerStash& s, const LayerParams& w, const LayerDims& d,
                   const LayerGroups& groups, const LayerRecompute& entry, const LayerContext& c,
                   runtime::Allocator& allocator) {
  const std::vector<ForwardPiece> pieces = rerun_pieces(entry, d.features);
  if (pieces.empty()) return;
  const runtime::trace::Scope trace({.name = "recompute", .layer = c.layer});
  const StashMaker<LayerStash> maker(layer_stash_spec(d, entry), allocator);
  for (ForwardPiece piece : pieces) {
    for (Tensor LayerStash::*member : forward_piece(piece).rebuilds)
      if (maker.find(member) != nullptr) maker.make(s, member, /*rebuild=*/true);
    rerun(piece, s, w, d, groups, c, allocator);
  }
}

Tensor layer_backward(LayerStash& s, const Tensor& dout, const LayerParams& w, const LayerParams& g,
                      const LayerDims& d, const LayerGroups& groups, const LayerRecompute& entry,
                      const LayerContext& c, runtime::Allocator& allocator) {
  TRAINER_ASSERT(entry.mode != RecomputeMode::full,
                 "full layers are rebuilt by their checkpoint group, then run as `none`");
  layer_rebuild(s, w, d, groups, entry, c, allocator);
  const int64_t HD = d.heads * d.head_dim;

  // dresidual, the residual stream's gradient (Ts, B, C): dropout_add hands dout to its x
  // unchanged (=), then each layernorm's backward adds the gradient of its input (+=).
  Tensor dresidual = sequence_shard(d, d.hidden, allocator, "dresidual");
  ops::copy(dresidual, dout);

  // mlp, in reverse: out = residual + dropout(fc2(act(fc1(ln2(residual)))))
  Tensor dfc2 = dropout_add_backward(dout, s.mlp_out_mask, d, allocator, "dfc2");
  if (d.features.swiglu) {
    Tensor dfc1 = fc2_swiglu_backward(dfc2, s, w, g, d, groups, allocator);  // (T, B, 2F)
    layernorm_linear_backward(dresidual, dfc1, s, w, g, kPreMlpLayernormFc1, d.fc1_width(), d,
                              groups, allocator);
  } else {
    Tensor dffn =
        fc2_act_backward(dfc2, s, w, g, d, groups, allocator);  // (T, B, F); fc1's dbias too
    layernorm_linear_backward(dresidual, dffn, s, w, g, kPreMlpLayernormFc1, d.ffn, d, groups,
                              allocator, LinearBiasGrad::taken);
  }

  // attention, in reverse: residual = input + dropout(proj(core_attn(qkv(ln1(input)))))
  Tensor& dinput = dresidual;  // the skip path hands it on (=); ln1's backward adds to it (+=)
  dfc2 = Tensor();
  Tensor dproj = dropout_add_backward(dresidual, s.attn_out_mask, d, allocator, "dproj");
  Tensor dctx =
      row_parallel_linear_backward(g.proj_weight, g.proj_bias, dproj, s.ctx, w.proj_weight, HD, d,
                                   groups, allocator);  // (T, B, H*D)
  dproj = Tensor();
  Tensor dqkv = core_attn_backward(dctx, s, d, groups, c, allocator);  // (T, B, qkv_width)
  rope(dqkv, d, c, /*backward=*/true);
  qk_norm_backward(dqkv, s, w, g, d);
  layernorm_linear_backward(dinput, dqkv, s, w, g, kInputLayernormQkv, d.qkv_width(), d, groups,
                            allocator);
  s = LayerStash();
  return dinput;
}

}  // namespace model
