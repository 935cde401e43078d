// Transformer layer forward/backward on the host backend. Rules: activation
// gradients are assigned (=), parameter gradients accumulate (+=); every stash
// tensor is allocated from the layer's stash spec (layer_stash.h).
#include "model/layer.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/elementwise.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/kernels/cpu/layernorm.h"
#include "runtime/kernels/cpu/softmax.h"
#include "runtime/kernels/cpu/vocab_parallel.h"
#include "parallel/mappings.h"

namespace model {
namespace {

namespace cpu = runtime::cpu;
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

Tensor workspace(runtime::Allocator& allocator, const runtime::Shape& shape,
                 DType dtype = DType::f32) {
  return Tensor::empty(allocator, shape, dtype, MemoryCategory::workspace);
}

runtime::DropoutKey key(const LayerContext& c, DropoutOp op) {
  return runtime::make_dropout_key(c.seed, static_cast<uint64_t>(c.step),
                                   static_cast<uint32_t>(c.layer), op);
}

// --- forward pieces, shared by forward and the backward-time rebuild ---------

void input_layernorm_forward(LayerStash& s, const LayerParams& w, const LayerDims& d) {
  cpu::layernorm_forward(s.ln1_out.f32(), s.ln1_mean.f32(), s.ln1_rstd.f32(), s.input.f32(),
                         w.ln1_weight.f32(), w.ln1_bias.f32(), d.seq_shard() * d.micro_batch,
                         d.hidden, d.layernorm_eps);
}

void pre_mlp_layernorm_forward(LayerStash& s, const LayerParams& w, const LayerDims& d) {
  cpu::layernorm_forward(s.ln2_out.f32(), s.ln2_mean.f32(), s.ln2_rstd.f32(), s.residual.f32(),
                         w.ln2_weight.f32(), w.ln2_bias.f32(), d.seq_shard() * d.micro_batch,
                         d.hidden, d.layernorm_eps);
}

// The full-sequence input of a column-parallel GEMM: gather_from_sp forward
// under sequence parallelism (copy_to_tp's forward is the identity).
Tensor column_parallel_input(const Tensor& shard, const LayerDims& d,
                             runtime::Allocator& allocator) {
  if (!d.sequence_parallel || d.tp_size == 1) return shard;
  Tensor full = workspace(allocator, {d.seq, d.micro_batch, shard.dim(2)});
  parallel::gather_from_sp_forward(*d.tp, full.f32(), shard.f32(), shard.numel());
  return full;
}

// The input gradient of a column-parallel GEMM, back to this rank's rows:
// gather_from_sp backward (reduce-scatter) or copy_to_tp backward (all-reduce).
Tensor column_parallel_input_grad(const Tensor& dfull, const LayerDims& d,
                                  runtime::Allocator& allocator) {
  if (d.tp_size == 1) return dfull;
  if (!d.sequence_parallel) {
    parallel::copy_to_tp_backward(*d.tp, dfull.f32(), dfull.numel());
    return dfull;
  }
  Tensor shard = workspace(allocator, {d.seq_shard(), d.micro_batch, dfull.dim(2)});
  parallel::gather_from_sp_backward(*d.tp, shard.f32(), dfull.f32(), shard.numel());
  return shard;
}

// out (Ts, B, C) = row-parallel linear: partial products summed over the group
// (reduce_from_tp, or reduce_scatter_to_sp), then the bias once.
Tensor row_parallel_linear(const Tensor& inp, const Tensor& weight, const Tensor& bias,
                           int64_t in_features, const LayerDims& d, runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden;
  Tensor out = workspace(allocator, {d.seq, d.micro_batch, C});
  if (d.tp_size == 1) {
    cpu::linear_forward(out.f32(), inp.f32(), weight.f32(), bias.f32(), rows, in_features, C);
    return out;
  }
  cpu::linear_forward(out.f32(), inp.f32(), weight.f32(), nullptr, rows, in_features, C);
  if (d.sequence_parallel) {
    Tensor shard = workspace(allocator, {d.seq_shard(), d.micro_batch, C});
    parallel::reduce_scatter_to_sp_forward(*d.tp, shard.f32(), out.f32(), shard.numel());
    out = shard;
  } else {
    parallel::reduce_from_tp_forward(*d.tp, out.f32(), out.numel());
  }
  cpu::add_bias(out.f32(), bias.f32(), d.seq_shard() * d.micro_batch, C);
  return out;
}

// The output gradient of a row-parallel GEMM over the full sequence:
// reduce_scatter_to_sp backward (all-gather); reduce_from_tp backward is the identity.
Tensor row_parallel_output_grad(const Tensor& dshard, const LayerDims& d,
                                runtime::Allocator& allocator) {
  if (!d.sequence_parallel || d.tp_size == 1) return dshard;
  Tensor full = workspace(allocator, {d.seq, d.micro_batch, dshard.dim(2)});
  parallel::reduce_scatter_to_sp_backward(*d.tp, full.f32(), dshard.f32(), dshard.numel());
  return full;
}

// probs = causal_softmax(q k^T / sqrt(D)); with attention dropout also mask, probs_drop.
void core_attn_probs_forward(LayerStash& s, const LayerDims& d, const LayerContext& c) {
  const int64_t BH = d.micro_batch * d.heads, T = d.seq, D = d.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  cpu::attention_scores_forward(s.probs.f32(), s.q.f32(), s.k.f32(), BH, T, D, scale);
  cpu::causal_softmax_forward(s.probs.f32(), s.probs.f32(), BH, T);
  if (d.attention_dropout > 0.f) {
    cpu::dropout_attention_forward(s.probs_drop.f32(), s.attn_mask.u8(), s.probs.f32(),
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
  cpu::linear_forward(s.fc1_out.f32(), input.f32(), w.fc1_weight.f32(), w.fc1_bias.f32(),
                      d.seq * d.micro_batch, d.hidden, d.ffn);
}

void act_forward(LayerStash& s, const LayerDims& d) {
  cpu::gelu_forward(s.gelu_out.f32(), s.fc1_out.f32(), s.fc1_out.numel(), d.gelu);
}

// out = x + dropout(y) on hidden states (y is overwritten by its dropped version).
void dropout_add(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& mask,
                 const LayerDims& d, const LayerContext& c, DropoutOp op) {
  if (d.hidden_dropout > 0.f) {
    cpu::dropout_hidden_forward(y.f32(), mask.u8(), y.f32(), d.seq_shard(), d.micro_batch,
                                d.hidden, d.seq_offset(), c.sample_offset, d.hidden_dropout,
                                key(c, op));
  }
  cpu::add(out.f32(), x.f32(), y.f32(), out.numel());
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
  Tensor qkv = workspace(allocator, {d.seq, d.micro_batch, 3 * HD});
  {
    const Tensor ln1_full = column_parallel_input(s.ln1_out, d, allocator);
    cpu::linear_forward(qkv.f32(), ln1_full.f32(), w.qkv_weight.f32(), w.qkv_bias.f32(), rows, C,
                        3 * HD);
  }
  cpu::split_qkv_heads(s.q.f32(), s.k.f32(), s.v.f32(), qkv.f32(), d.seq, d.micro_batch, d.heads,
                       d.head_dim);
  qkv = Tensor();
  core_attn_probs_forward(s, d, c);                                    // probs (B, H, T, T)
  Tensor ctx_heads = workspace(allocator, {d.micro_batch, d.heads, d.seq, d.head_dim});
  cpu::attention_context_forward(ctx_heads.f32(), context_input(s, d).f32(), s.v.f32(),
                                 d.micro_batch * d.heads, d.seq, d.head_dim);
  cpu::merge_heads(s.ctx.f32(), ctx_heads.f32(), d.seq, d.micro_batch, d.heads, d.head_dim);
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
  Tensor dres = workspace(allocator, {d.seq_shard(), d.micro_batch, C});
  std::copy(dout.f32(), dout.f32() + dout.numel(), dres.f32());

  // mlp: out = residual + dropout(fc2(gelu(fc1(ln2(residual)))))
  Tensor dfc2 = workspace(allocator, {d.seq_shard(), d.micro_batch, C});
  if (d.hidden_dropout > 0.f) {
    cpu::dropout_backward(dfc2.f32(), dout.f32(), s.mlp_out_mask.u8(), dfc2.numel(),
                          d.hidden_dropout);
  } else {
    std::copy(dout.f32(), dout.f32() + dout.numel(), dfc2.f32());
  }
  Tensor dffn = workspace(allocator, {d.seq, d.micro_batch, d.ffn});
  {
    const Tensor dfc2_full = row_parallel_output_grad(dfc2, d, allocator);
    cpu::linear_backward(dffn.f32(), g.fc2_weight.f32(), g.fc2_bias.f32(), dfc2_full.f32(),
                         s.gelu_out.f32(), w.fc2_weight.f32(), rows, d.ffn, C);
  }
  cpu::gelu_backward(dffn.f32(), dffn.f32(), s.fc1_out.f32(), dffn.numel(), d.gelu);
  {
    Tensor dln_full = workspace(allocator, {d.seq, d.micro_batch, C});
    const Tensor ln2_full = column_parallel_input(s.ln2_out, d, allocator);
    cpu::linear_backward(dln_full.f32(), g.fc1_weight.f32(), g.fc1_bias.f32(), dffn.f32(),
                         ln2_full.f32(), w.fc1_weight.f32(), rows, C, d.ffn);
    dffn = Tensor();
    const Tensor dln = column_parallel_input_grad(dln_full, d, allocator);
    cpu::layernorm_backward(dres.f32(), g.ln2_weight.f32(), g.ln2_bias.f32(), dln.f32(),
                            s.residual.f32(), w.ln2_weight.f32(), s.ln2_mean.f32(),
                            s.ln2_rstd.f32(), rows_shard, C);
  }

  // attention: residual = input + dropout(proj(ctx))
  Tensor& dproj = dfc2;
  if (d.hidden_dropout > 0.f) {
    cpu::dropout_backward(dproj.f32(), dres.f32(), s.attn_out_mask.u8(), dproj.numel(),
                          d.hidden_dropout);
  } else {
    std::copy(dres.f32(), dres.f32() + dres.numel(), dproj.f32());
  }
  Tensor dctx = workspace(allocator, {d.seq, d.micro_batch, HD});
  {
    const Tensor dproj_full = row_parallel_output_grad(dproj, d, allocator);
    cpu::linear_backward(dctx.f32(), g.proj_weight.f32(), g.proj_bias.f32(), dproj_full.f32(),
                         s.ctx.f32(), w.proj_weight.f32(), rows, HD, C);
  }
  Tensor dctx_heads = workspace(allocator, {d.micro_batch, d.heads, T, D});
  cpu::split_heads(dctx_heads.f32(), dctx.f32(), T, d.micro_batch, d.heads, D);
  dctx = Tensor();
  Tensor dprobs = workspace(allocator, {d.micro_batch, d.heads, T, T});
  Tensor dq = workspace(allocator, {d.micro_batch, d.heads, T, D});
  Tensor dk = workspace(allocator, {d.micro_batch, d.heads, T, D});
  Tensor dv = workspace(allocator, {d.micro_batch, d.heads, T, D});
  cpu::attention_context_backward(dprobs.f32(), dv.f32(), dctx_heads.f32(),
                                  context_input(s, d).f32(), s.v.f32(), BH, T, D);
  dctx_heads = Tensor();
  if (d.attention_dropout > 0.f) {
    cpu::dropout_backward(dprobs.f32(), dprobs.f32(), s.attn_mask.u8(), dprobs.numel(),
                          d.attention_dropout);
  }
  cpu::causal_softmax_backward(dprobs.f32(), dprobs.f32(), s.probs.f32(), BH, T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  cpu::attention_scores_backward(dq.f32(), dk.f32(), dprobs.f32(), s.q.f32(), s.k.f32(), BH, T,
                                 D, scale);
  dprobs = Tensor();
  Tensor dqkv = workspace(allocator, {d.seq, d.micro_batch, 3 * HD});
  cpu::merge_qkv_heads(dqkv.f32(), dq.f32(), dk.f32(), dv.f32(), T, d.micro_batch, d.heads, D);
  dq = Tensor(), dk = Tensor(), dv = Tensor();
  {
    Tensor dln_full = workspace(allocator, {d.seq, d.micro_batch, C});
    const Tensor ln1_full = column_parallel_input(s.ln1_out, d, allocator);
    cpu::linear_backward(dln_full.f32(), g.qkv_weight.f32(), g.qkv_bias.f32(), dqkv.f32(),
                         ln1_full.f32(), w.qkv_weight.f32(), rows, C, 3 * HD);
    dqkv = Tensor();
    const Tensor dln = column_parallel_input_grad(dln_full, d, allocator);
    cpu::layernorm_backward(dres.f32(), g.ln1_weight.f32(), g.ln1_bias.f32(), dln.f32(),
                            s.input.f32(), w.ln1_weight.f32(), s.ln1_mean.f32(),
                            s.ln1_rstd.f32(), rows_shard, C);
  }
  s = LayerStash();
  return dres;
}

}  // namespace model
