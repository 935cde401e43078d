// Transformer layer forward/backward on the host backend. Rules: activation
// gradients are assigned (=), parameter gradients accumulate (+=); every stash
// tensor is allocated from the layer's stash spec (layer_stash.h).
#include "model/layer.h"

#include <algorithm>
#include <cmath>

#include "parallel/core/mappings.h"
#include "runtime/ops.h"

namespace model {
namespace {

namespace ops = runtime::ops;
using runtime::DType;
using runtime::MemoryCategory;
using runtime::DropoutOp;

// Allocates stash tensors from the spec: kept ones (or rebuilt ones) as
// `activation`, forward-only ones as `workspace`.
class StashMaker {
 public:
  StashMaker(const LayerDims& dims, const LayerRecompute& entry, runtime::Allocator& allocator)
      : spec_(layer_stash_spec(dims, entry)), allocator_(allocator) {}

  const StashTensorSpec* find(Tensor LayerStash::*member) const {
    for (const StashTensorSpec& s : spec_)
      if (s.member == member) return &s;
    return nullptr;
  }
  bool kept(Tensor LayerStash::*member) const {
    const StashTensorSpec* s = find(member);
    return s != nullptr && s->kept;
  }
  // Allocates stash.*member; `rebuild` marks a backward-time rebuild (always activation).
  void make(LayerStash& stash, Tensor LayerStash::*member, bool rebuild = false) const {
    const StashTensorSpec* s = find(member);
    TRAINER_ASSERT(s != nullptr, "stash member not in spec");
    const MemoryCategory category =
        (rebuild || s->kept) ? MemoryCategory::activation : MemoryCategory::workspace;
    stash.*member = Tensor::empty(allocator_, s->shape, s->dtype, category);
  }
  void release_dropped(LayerStash& stash) const {
    for (const StashTensorSpec& s : spec_)
      if (!s.kept) stash.*s.member = Tensor();
  }
  const std::vector<StashTensorSpec>& spec() const { return spec_; }

 private:
  std::vector<StashTensorSpec> spec_;
  runtime::Allocator& allocator_;
};

// A temporary of the activations' type (f32 on the host, bf16 on a device).
Tensor workspace(runtime::Allocator& allocator, const runtime::Shape& shape, DType dtype) {
  return Tensor::empty(allocator, shape, dtype, MemoryCategory::workspace);
}

runtime::DropoutKey key(const LayerContext& c, DropoutOp op) {
  return runtime::make_dropout_key(c.seed, static_cast<uint64_t>(c.step),
                                   static_cast<uint32_t>(c.layer), op);
}

// --- forward pieces, shared by forward and the backward-time rebuild ---------

void input_layernorm_forward(LayerStash& s, const LayerParams& w, const LayerDims& d) {
  ops::layernorm_forward(s.ln1_out, s.ln1_mean, s.ln1_rstd, s.input,
                         w.ln1_weight, w.ln1_bias, d.seq_shard() * d.micro_batch,
                         d.hidden, d.layernorm_eps);
}

void pre_mlp_layernorm_forward(LayerStash& s, const LayerParams& w, const LayerDims& d) {
  ops::layernorm_forward(s.ln2_out, s.ln2_mean, s.ln2_rstd, s.residual,
                         w.ln2_weight, w.ln2_bias, d.seq_shard() * d.micro_batch,
                         d.hidden, d.layernorm_eps);
}

// The full-sequence input of a column-parallel GEMM: gather_from_sp forward
// under sequence parallelism (copy_to_tp's forward is the identity).
Tensor column_parallel_input(const Tensor& shard, const LayerDims& d,
                             runtime::Allocator& allocator) {
  if (!d.sequence_parallel || d.tp_size == 1) return shard;
  Tensor full = workspace(allocator, {d.seq, d.micro_batch, shard.dim(2)}, d.activation_dtype);
  parallel::gather_from_sp_forward(*d.tp, full, shard);
  return full;
}

// The input gradient of a column-parallel GEMM, back to this rank's rows:
// gather_from_sp backward (reduce-scatter) or copy_to_tp backward (all-reduce).
Tensor column_parallel_input_grad(const Tensor& dfull, const LayerDims& d,
                                  runtime::Allocator& allocator) {
  if (d.tp_size == 1) return dfull;
  if (!d.sequence_parallel) {
    parallel::copy_to_tp_backward(*d.tp, dfull);
    return dfull;
  }
  Tensor shard = workspace(allocator, {d.seq_shard(), d.micro_batch, dfull.dim(2)}, d.activation_dtype);
  parallel::gather_from_sp_backward(*d.tp, shard, dfull);
  return shard;
}

// out (Ts, B, C) = row-parallel linear: partial products summed over the group
// (reduce_from_tp, or reduce_scatter_to_sp), then the bias once.
Tensor row_parallel_linear(const Tensor& inp, const Tensor& weight, const Tensor& bias,
                           int64_t in_features, const LayerDims& d, runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden;
  Tensor out = workspace(allocator, {d.seq, d.micro_batch, C}, d.activation_dtype);
  if (d.tp_size == 1) {
    ops::linear_forward(out, inp, weight, bias, rows, in_features, C);
    return out;
  }
  ops::linear_forward(out, inp, weight, Tensor(), rows, in_features, C);
  if (d.sequence_parallel) {
    Tensor shard = workspace(allocator, {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
    parallel::reduce_scatter_to_sp_forward(*d.tp, shard, out);
    out = shard;
  } else {
    parallel::reduce_from_tp_forward(*d.tp, out);
  }
  ops::add_bias(out, bias, d.seq_shard() * d.micro_batch, C);
  return out;
}

// The output gradient of a row-parallel GEMM over the full sequence:
// reduce_scatter_to_sp backward (all-gather); reduce_from_tp backward is the identity.
Tensor row_parallel_output_grad(const Tensor& dshard, const LayerDims& d,
                                runtime::Allocator& allocator) {
  if (!d.sequence_parallel || d.tp_size == 1) return dshard;
  Tensor full = workspace(allocator, {d.seq, d.micro_batch, dshard.dim(2)}, d.activation_dtype);
  parallel::reduce_scatter_to_sp_backward(*d.tp, full, dshard);
  return full;
}

// probs = causal_softmax(q k^T / sqrt(D)); with attention dropout also mask, probs_drop.
void core_attn_probs_forward(LayerStash& s, const LayerDims& d, const LayerContext& c) {
  const int64_t BH = d.micro_batch * d.heads, T = d.seq, D = d.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  ops::attention_scores_forward(s.probs, s.q, s.k, BH, T, D, scale);
  ops::causal_softmax_forward(s.probs, s.probs, BH, T);
  if (d.attention_dropout > 0.f) {
    ops::dropout_attention_forward(s.probs_drop, s.attn_mask, s.probs,
                                   d.micro_batch, d.heads, T, d.head_offset(), c.sample_offset,
                                   d.attention_dropout, key(c, DropoutOp::attention_probs));
  }
}

const Tensor& context_input(const LayerStash& s, const LayerDims& d) {
  return d.attention_dropout > 0.f ? s.probs_drop : s.probs;
}

void fc1_forward(LayerStash& s, const LayerParams& w, const LayerDims& d,
                 runtime::Allocator& allocator) {
  const Tensor input = column_parallel_input(s.ln2_out, d, allocator);
  ops::linear_forward(s.fc1_out, input, w.fc1_weight, w.fc1_bias,
                      d.seq * d.micro_batch, d.hidden, d.ffn);
}

void act_forward(LayerStash& s, const LayerDims& d) {
  ops::gelu_forward(s.gelu_out, s.fc1_out, s.fc1_out.numel(), d.gelu);
}

// out = x + dropout(y) on hidden states (y is overwritten by its dropped version).
void dropout_add(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& mask,
                 const LayerDims& d, const LayerContext& c, DropoutOp op) {
  if (d.hidden_dropout > 0.f) {
    ops::dropout_hidden_forward(y, mask, y, d.seq_shard(), d.micro_batch,
                                d.hidden, d.seq_offset(), c.sample_offset, d.hidden_dropout,
                                key(c, op));
  }
  ops::add(out, x, y, out.numel());
}

}  // namespace

void layer_forward(const Tensor& out, LayerStash& s, const Tensor& input, const LayerParams& w,
                   const LayerDims& d, const LayerRecompute& entry, const LayerContext& c,
                   runtime::Allocator& allocator) {
  const StashMaker maker(d, entry, allocator);
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden, HD = d.heads * d.head_dim;
  for (const StashTensorSpec& spec : maker.spec())
    if (spec.member != &LayerStash::input) maker.make(s, spec.member);
  s.input = input;

  input_layernorm_forward(s, w, d);                                    // ln1_out (Ts, B, C)
  Tensor qkv = workspace(allocator, {d.seq, d.micro_batch, 3 * HD}, d.activation_dtype);
  {
    const Tensor ln1_full = column_parallel_input(s.ln1_out, d, allocator);
    ops::linear_forward(qkv, ln1_full, w.qkv_weight, w.qkv_bias, rows, C,
                        3 * HD);
  }
  ops::split_qkv_heads(s.q, s.k, s.v, qkv, d.seq, d.micro_batch, d.heads,
                       d.head_dim);
  qkv = Tensor();
  core_attn_probs_forward(s, d, c);                                    // probs (B, H, T, T)
  Tensor ctx_heads = workspace(allocator, {d.micro_batch, d.heads, d.seq, d.head_dim}, d.activation_dtype);
  ops::attention_context_forward(ctx_heads, context_input(s, d), s.v,
                                 d.micro_batch * d.heads, d.seq, d.head_dim);
  ops::merge_heads(s.ctx, ctx_heads, d.seq, d.micro_batch, d.heads, d.head_dim);
  ctx_heads = Tensor();
  Tensor proj = row_parallel_linear(s.ctx, w.proj_weight, w.proj_bias, HD, d, allocator);
  dropout_add(s.residual, input, proj, s.attn_out_mask, d, c, DropoutOp::attention_out);
  proj = Tensor();

  pre_mlp_layernorm_forward(s, w, d);                                  // ln2_out (Ts, B, C)
  fc1_forward(s, w, d, allocator);                                     // fc1_out (T, B, F)
  act_forward(s, d);                                                   // gelu_out (T, B, F)
  Tensor fc2 = row_parallel_linear(s.gelu_out, w.fc2_weight, w.fc2_bias, d.ffn, d, allocator);
  dropout_add(out, s.residual, fc2, s.mlp_out_mask, d, c, DropoutOp::mlp_out);

  if (!maker.kept(&LayerStash::input)) s.input = Tensor();
  maker.release_dropped(s);
}

Tensor layer_backward(LayerStash& s, const Tensor& dout, const LayerParams& w,
                      const LayerParams& g, const LayerDims& d, const LayerRecompute& entry,
                      const LayerContext& c, runtime::Allocator& allocator) {
  TRAINER_ASSERT(entry.mode != RecomputeMode::full,
                 "full layers are rebuilt by their checkpoint group, then run as `none`");
  const StashMaker maker(d, entry, allocator);
  const int64_t rows = d.seq * d.micro_batch, rows_shard = d.seq_shard() * d.micro_batch;
  const int64_t C = d.hidden, HD = d.heads * d.head_dim;
  const int64_t BH = d.micro_batch * d.heads, T = d.seq, D = d.head_dim;

  // Rebuild what the plan dropped, in forward order, with forward's own code.
  auto rebuild = [&](Tensor LayerStash::*member) {
    const bool dropped = maker.find(member) != nullptr && !maker.kept(member);
    if (dropped) maker.make(s, member, /*rebuild=*/true);
    return dropped;
  };
  if (rebuild(&LayerStash::ln1_out)) input_layernorm_forward(s, w, d);
  {
    const bool probs = rebuild(&LayerStash::probs);
    const bool mask = rebuild(&LayerStash::attn_mask);
    const bool probs_drop = rebuild(&LayerStash::probs_drop);
    if (probs || mask || probs_drop) core_attn_probs_forward(s, d, c);
  }
  if (rebuild(&LayerStash::ln2_out)) pre_mlp_layernorm_forward(s, w, d);
  if (rebuild(&LayerStash::fc1_out)) fc1_forward(s, w, d, allocator);
  if (rebuild(&LayerStash::gelu_out)) act_forward(s, d);

  // dres: gradient of the residual stream (Ts, B, C); it becomes dinput at the end.
  Tensor dres = workspace(allocator, {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
  ops::copy(dres, dout);

  // mlp: out = residual + dropout(fc2(gelu(fc1(ln2(residual)))))
  Tensor dfc2 = workspace(allocator, {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
  if (d.hidden_dropout > 0.f) {
    ops::dropout_backward(dfc2, dout, s.mlp_out_mask, dfc2.numel(),
                          d.hidden_dropout);
  } else {
    ops::copy(dfc2, dout);
  }
  Tensor dffn = workspace(allocator, {d.seq, d.micro_batch, d.ffn}, d.activation_dtype);
  {
    const Tensor dfc2_full = row_parallel_output_grad(dfc2, d, allocator);
    ops::linear_backward(dffn, g.fc2_weight, g.fc2_bias, dfc2_full,
                         s.gelu_out, w.fc2_weight, rows, d.ffn, C);
  }
  ops::gelu_backward(dffn, dffn, s.fc1_out, dffn.numel(), d.gelu);
  {
    Tensor dln_full = workspace(allocator, {d.seq, d.micro_batch, C}, d.activation_dtype);
    const Tensor ln2_full = column_parallel_input(s.ln2_out, d, allocator);
    ops::linear_backward(dln_full, g.fc1_weight, g.fc1_bias, dffn,
                         ln2_full, w.fc1_weight, rows, C, d.ffn);
    dffn = Tensor();
    const Tensor dln = column_parallel_input_grad(dln_full, d, allocator);
    ops::layernorm_backward(dres, g.ln2_weight, g.ln2_bias, dln,
                            s.residual, w.ln2_weight, s.ln2_mean,
                            s.ln2_rstd, rows_shard, C);
  }

  // attention: residual = input + dropout(proj(ctx))
  Tensor& dproj = dfc2;
  if (d.hidden_dropout > 0.f) {
    ops::dropout_backward(dproj, dres, s.attn_out_mask, dproj.numel(),
                          d.hidden_dropout);
  } else {
    ops::copy(dproj, dres);
  }
  Tensor dctx = workspace(allocator, {d.seq, d.micro_batch, HD}, d.activation_dtype);
  {
    const Tensor dproj_full = row_parallel_output_grad(dproj, d, allocator);
    ops::linear_backward(dctx, g.proj_weight, g.proj_bias, dproj_full,
                         s.ctx, w.proj_weight, rows, HD, C);
  }
  Tensor dctx_heads = workspace(allocator, {d.micro_batch, d.heads, T, D}, d.activation_dtype);
  ops::split_heads(dctx_heads, dctx, T, d.micro_batch, d.heads, D);
  dctx = Tensor();
  Tensor dprobs = workspace(allocator, {d.micro_batch, d.heads, T, T}, d.activation_dtype);
  Tensor dq = workspace(allocator, {d.micro_batch, d.heads, T, D}, d.activation_dtype);
  Tensor dk = workspace(allocator, {d.micro_batch, d.heads, T, D}, d.activation_dtype);
  Tensor dv = workspace(allocator, {d.micro_batch, d.heads, T, D}, d.activation_dtype);
  ops::attention_context_backward(dprobs, dv, dctx_heads,
                                  context_input(s, d), s.v, BH, T, D);
  dctx_heads = Tensor();
  if (d.attention_dropout > 0.f) {
    ops::dropout_backward(dprobs, dprobs, s.attn_mask, dprobs.numel(),
                          d.attention_dropout);
  }
  ops::causal_softmax_backward(dprobs, dprobs, s.probs, BH, T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  ops::attention_scores_backward(dq, dk, dprobs, s.q, s.k, BH, T,
                                 D, scale);
  dprobs = Tensor();
  Tensor dqkv = workspace(allocator, {d.seq, d.micro_batch, 3 * HD}, d.activation_dtype);
  ops::merge_qkv_heads(dqkv, dq, dk, dv, T, d.micro_batch, d.heads, D);
  dq = Tensor(), dk = Tensor(), dv = Tensor();
  {
    Tensor dln_full = workspace(allocator, {d.seq, d.micro_batch, C}, d.activation_dtype);
    const Tensor ln1_full = column_parallel_input(s.ln1_out, d, allocator);
    ops::linear_backward(dln_full, g.qkv_weight, g.qkv_bias, dqkv,
                         ln1_full, w.qkv_weight, rows, C, 3 * HD);
    dqkv = Tensor();
    const Tensor dln = column_parallel_input_grad(dln_full, d, allocator);
    ops::layernorm_backward(dres, g.ln1_weight, g.ln1_bias, dln,
                            s.input, w.ln1_weight, s.ln1_mean,
                            s.ln1_rstd, rows_shard, C);
  }
  s = LayerStash();
  return dres;
}

}  // namespace model
