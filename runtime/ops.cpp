// Dispatch of runtime/ops.h: host tensors run the CPU kernels through the host adapters below
// (one per operator, argument struct to raw pointers), device tensors the registered backend.
// The host table and the dispatching functions are generated from TRAINER_OPS.
#include "runtime/ops.h"

#include <cstring>
#include <string>

#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/convert.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/elementwise.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cpu/flash_block.h"
#include "runtime/kernels/cpu/gelu.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/kernels/cpu/layernorm.h"
#include "runtime/kernels/cpu/rmsnorm.h"
#include "runtime/kernels/cpu/rope.h"
#include "runtime/kernels/cpu/softmax.h"
#include "runtime/kernels/cpu/swiglu.h"
#include "runtime/kernels/cpu/vocab_parallel.h"
#include "runtime/meta_device.h"

namespace runtime::ops {
namespace {
const Backend* g_device_backend = nullptr;  // process-wide: one device kind per process
}  // namespace

void register_device_backend(const Backend* backend) {
  g_device_backend = backend;
}

const Backend& device_backend(const char* op) {
  if (g_device_backend == nullptr) {
    throw LibraryError(std::string("ops::") + op +
                       " on a device tensor, but no device backend is registered");
  }
  return *g_device_backend;
}

namespace {

// ---- the host kernels: any memory the host can address ----
namespace host {

float* optional_f32(const Tensor& t) {
  return t.defined() ? t.f32() : nullptr;
}

// An attention call's document starts (Note [Document masking]), checked: one per query row and
// sample, none after its own row's position (q_position + row) nor before the previous row's, as
// the kernels assume; null for one document.
const int32_t* document_starts(const Tensor& starts, int64_t rows, int64_t micro_batch,
                               int64_t q_position) {
  if (!starts.defined()) return nullptr;
  TRAINER_ASSERT(starts.dtype() == DType::i32 && starts.numel() == rows * micro_batch,
                 "document_starts must be i32 with " << rows << " x " << micro_batch
                                                     << " elements; got " << starts.numel());
  const int32_t* s = starts.i32();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t b = 0; b < micro_batch; ++b) {
      const int32_t start = s[i * micro_batch + b];
      const int32_t previous = i == 0 ? 0 : s[(i - 1) * micro_batch + b];
      TRAINER_ASSERT(start >= previous && start <= q_position + i,
                     "document start " << start << " of row " << i << ", sample " << b
                                       << " is after its position " << q_position + i
                                       << " or before the previous row's " << previous);
    }
  }
  return s;
}

const int32_t* document_starts(const Tensor& starts, const FlashAttentionDims& dims) {
  return document_starts(starts, dims.seq_len, dims.micro_batch, dims.q_position);
}

template <class Args>
cpu::SoftmaxMask softmax_mask(const Args& args) {
  TRAINER_ASSERT(args.micro_batch >= 1 && args.batch_heads % args.micro_batch == 0,
                 "causal softmax: micro_batch " << args.micro_batch << " must divide batch_heads "
                                                << args.batch_heads);
  return {.window = args.window,
          .document_starts = document_starts(args.document_starts, args.seq, args.micro_batch, 0),
          .micro_batch = args.micro_batch,
          .heads_per_sample = args.batch_heads / args.micro_batch};
}

void linear_forward(const LinearForward& args) {
  cpu::linear_forward(args.out.f32(), args.input.f32(), args.weight.f32(), optional_f32(args.bias),
                      args.rows, args.in_features, args.out_features);
}

void linear_backward(const LinearBackward& args) {
  cpu::linear_backward(optional_f32(args.dinput), args.dweight.f32(), optional_f32(args.dbias),
                       args.dout.f32(), args.input.f32(), args.weight.f32(), args.rows,
                       args.in_features, args.out_features);
}

// Note [MLP epilogues]: exactly linear_forward, then gelu_forward.
void linear_gelu_forward(const LinearGeluForward& args) {
  cpu::linear_forward(args.pre_activation.f32(), args.input.f32(), args.weight.f32(),
                      args.bias.f32(), args.rows, args.in_features, args.out_features);
  cpu::gelu_forward(args.out.f32(), args.pre_activation.f32(), args.rows * args.out_features,
                    args.kind);
}

// Note [MLP epilogues]: exactly linear_backward, gelu_backward in place, then the bias
// gradient linear_backward would take of dinput.
void gelu_linear_backward(const GeluLinearBackward& args) {
  cpu::linear_backward(args.dinput.f32(), args.dweight.f32(), optional_f32(args.dbias),
                       args.dout.f32(), args.input.f32(), args.weight.f32(), args.rows,
                       args.in_features, args.out_features);
  cpu::gelu_backward(args.dinput.f32(), args.dinput.f32(), args.pre_activation.f32(),
                     args.rows * args.in_features, args.kind);
  cpu::bias_gradient(args.pre_bias.f32(), args.dinput.f32(), args.rows, args.in_features);
}

void layernorm_forward(const LayernormForward& args) {
  cpu::layernorm_forward(args.out.f32(), args.mean.f32(), args.rstd.f32(), args.input.f32(),
                         args.weight.f32(), args.bias.f32(), args.rows, args.channels, args.eps);
}

void layernorm_backward(const LayernormBackward& args) {
  cpu::layernorm_backward(args.dinput.f32(), args.dweight.f32(), args.dbias.f32(), args.dout.f32(),
                          args.input.f32(), args.weight.f32(), args.mean.f32(), args.rstd.f32(),
                          args.rows, args.channels);
}

void rmsnorm_forward(const RmsnormForward& args) {
  cpu::rmsnorm_forward(args.out.f32(), args.rstd.f32(), args.input.f32(), args.weight.f32(),
                       args.rows, args.channels, args.eps);
}

void rmsnorm_backward(const RmsnormBackward& args) {
  cpu::rmsnorm_backward(args.dinput.f32(), args.dweight.f32(), args.dout.f32(), args.input.f32(),
                        args.weight.f32(), args.rstd.f32(), args.rows, args.channels);
}

void causal_softmax_forward(const CausalSoftmaxForward& args) {
  cpu::causal_softmax_forward(args.probs.f32(), args.scores.f32(), args.batch_heads, args.seq,
                              softmax_mask(args));
}

void causal_softmax_backward(const CausalSoftmaxBackward& args) {
  cpu::causal_softmax_backward(args.dscores.f32(), args.dprobs.f32(), args.probs.f32(),
                               args.batch_heads, args.seq, softmax_mask(args));
}

void gelu_forward(const GeluForward& args) {
  cpu::gelu_forward(args.out.f32(), args.input.f32(), args.count, args.kind);
}

void gelu_backward(const GeluBackward& args) {
  cpu::gelu_backward(args.dinput.f32(), args.dout.f32(), args.input.f32(), args.count, args.kind);
}

void swiglu_forward(const SwigluForward& args) {
  cpu::swiglu_forward(args.out.f32(), args.input.f32(), args.rows, args.ffn);
}

void swiglu_backward(const SwigluBackward& args) {
  cpu::swiglu_backward(args.dinput.f32(), args.dout.f32(), args.input.f32(), args.rows, args.ffn);
}

void dropout_hidden_forward(const DropoutHiddenForward& args) {
  cpu::dropout_hidden_forward(args.out.f32(), args.mask.u8(), args.input.f32(), args.seq,
                              args.micro_batch, args.channels, args.seq_offset, args.sample_offset,
                              args.drop_probability, args.key);
}

void dropout_attention_forward(const DropoutAttentionForward& args) {
  cpu::dropout_attention_forward(args.out.f32(), args.mask.u8(), args.input.f32(), args.micro_batch,
                                 args.heads, args.seq, args.head_offset, args.sample_offset,
                                 args.drop_probability, args.key);
}

void dropout_backward(const DropoutBackward& args) {
  cpu::dropout_backward(args.dinput.f32(), args.dout.f32(), args.mask.u8(), args.count,
                        args.drop_probability);
}

void dropout_add_hidden_forward(const DropoutAddHiddenForward& args) {
  TRAINER_ASSERT(args.out.raw() != args.residual.raw(),
                 "dropout_add_hidden_forward: out must not alias residual");
  const int64_t count = args.seq * args.micro_batch * args.channels;
  // Exactly dropout_hidden_forward then add: residual + dropped in float, one rounding each.
  cpu::dropout_hidden_forward(args.out.f32(), args.mask.u8(), args.input.f32(), args.seq,
                              args.micro_batch, args.channels, args.seq_offset, args.sample_offset,
                              args.drop_probability, args.key);
  cpu::add(args.out.f32(), args.residual.f32(), args.out.f32(), count);
}

void embedding_forward(const EmbeddingForward& args) {
  cpu::embedding_forward(args.out.f32(), args.tokens.i32(), args.wte.f32(), args.rows,
                         args.channels, args.vocab_start, args.vocab_rows);
}

void embedding_backward(const EmbeddingBackward& args) {
  cpu::embedding_backward(args.dwte.f32(), args.dout.f32(), args.tokens.i32(), args.rows,
                          args.channels, args.vocab_start, args.vocab_rows);
}

void position_embedding_forward(const PositionEmbeddingForward& args) {
  cpu::position_embedding_forward(
      args.out.f32(), args.wpe.f32(), args.seq, args.micro_batch, args.channels, args.seq_offset,
      document_starts(args.document_starts, args.seq, args.micro_batch, args.seq_offset));
}

void position_embedding_backward(const PositionEmbeddingBackward& args) {
  cpu::position_embedding_backward(
      args.dwpe.f32(), args.dout.f32(), args.seq, args.micro_batch, args.channels, args.seq_offset,
      document_starts(args.document_starts, args.seq, args.micro_batch, args.seq_offset));
}

void cross_entropy_forward(const CrossEntropyForward& args) {
  cpu::cross_entropy_forward(args.losses.f32(), args.lse.f32(), args.logits.f32(),
                             args.targets.i32(), args.rows, args.vocab, args.padded_vocab);
}

void cross_entropy_backward(const CrossEntropyBackward& args) {
  cpu::cross_entropy_backward(args.dlogits.f32(), args.logits.f32(), args.lse.f32(),
                              args.targets.i32(), args.rows, args.vocab, args.padded_vocab,
                              args.scale);
}

void vocab_shard_max(const VocabShardMax& args) {
  cpu::vocab_shard_max(args.row_max.f32(), args.logits.f32(), args.rows, args.real_cols,
                       args.shard_cols);
}

void vocab_shard_sum_exp(const VocabShardSumExp& args) {
  cpu::vocab_shard_sum_exp(args.row_sum.f32(), args.logits.f32(), args.row_max.f32(), args.rows,
                           args.real_cols, args.shard_cols);
}

void vocab_shard_target_logit(const VocabShardTargetLogit& args) {
  cpu::vocab_shard_target_logit(args.target_logit.f32(), args.logits.f32(), args.targets.i32(),
                                args.rows, args.vocab_start, args.real_cols, args.shard_cols);
}

void vocab_shard_finish(const VocabShardFinish& args) {
  cpu::vocab_shard_finish(args.losses.f32(), args.lse.f32(), args.row_max.f32(), args.targets.i32(),
                          args.rows);
}

void vocab_shard_cross_entropy_backward(const VocabShardCrossEntropyBackward& args) {
  cpu::vocab_shard_cross_entropy_backward(args.dlogits.f32(), args.logits.f32(), args.lse.f32(),
                                          args.targets.i32(), args.rows, args.vocab_start,
                                          args.real_cols, args.shard_cols, args.scale);
}

void split_qkv_heads(const SplitQkvHeads& args) {
  cpu::split_qkv_heads(args.q.f32(), args.k.f32(), args.v.f32(), args.qkv.f32(), args.seq,
                       args.micro_batch, args.heads, args.head_dim, args.group_size);
}

void merge_qkv_heads(const MergeQkvHeads& args) {
  cpu::merge_qkv_heads(args.dqkv.f32(), args.dq.f32(), args.dk.f32(), args.dv.f32(), args.seq,
                       args.micro_batch, args.heads, args.head_dim, args.group_size);
}

void merge_heads(const MergeHeads& args) {
  cpu::merge_heads(args.ctx.f32(), args.ctx_heads.f32(), args.seq, args.micro_batch, args.heads,
                   args.head_dim);
}

void split_heads(const SplitHeads& args) {
  cpu::split_heads(args.ctx_heads.f32(), args.ctx.f32(), args.seq, args.micro_batch, args.heads,
                   args.head_dim);
}

namespace {
// RopeForward and RopeBackward: the same fields (Note [Document positions]).
template <class Args>
cpu::RopeDims rope_dims(const Args& args) {
  return {args.seq,
          args.micro_batch,
          args.kv_heads,
          args.group_size,
          args.head_dim,
          args.seq_offset,
          args.base,
          args.scaling,
          document_starts(args.document_starts, args.seq, args.micro_batch, args.seq_offset)};
}
}  // namespace

void rope_forward(const RopeForward& args) {
  cpu::rope_forward(args.qkv.f32(), rope_dims(args));
}

void rope_backward(const RopeBackward& args) {
  cpu::rope_backward(args.dqkv.f32(), rope_dims(args));
}

namespace {
cpu::QkHeads cpu_heads(const QkNormHeads& h) {
  return {h.rows, h.kv_heads, h.group_size, h.head_dim};
}
}  // namespace

void qk_norm_forward(const QkNormForward& args) {
  cpu::qk_norm_forward(args.qkv.f32(), args.input.f32(), args.rstd.f32(), args.q_weight.f32(),
                       args.k_weight.f32(), cpu_heads(args.heads), args.eps);
}

void qk_norm_backward(const QkNormBackward& args) {
  cpu::qk_norm_backward(args.dqkv.f32(), args.dq_weight.f32(), args.dk_weight.f32(),
                        args.input.f32(), args.rstd.f32(), args.q_weight.f32(), args.k_weight.f32(),
                        cpu_heads(args.heads));
}

void attention_scores_forward(const AttentionScoresForward& args) {
  cpu::attention_scores_forward(args.scores.f32(), args.q.f32(), args.k.f32(), args.batch_heads,
                                args.seq, args.head_dim, args.scale, args.group_size);
}

void attention_scores_backward(const AttentionScoresBackward& args) {
  cpu::attention_scores_backward(args.dq.f32(), args.dk.f32(), args.dscores.f32(), args.q.f32(),
                                 args.k.f32(), args.batch_heads, args.seq, args.head_dim,
                                 args.scale, args.group_size);
}

void attention_context_forward(const AttentionContextForward& args) {
  cpu::attention_context_forward(args.ctx_heads.f32(), args.probs.f32(), args.v.f32(),
                                 args.batch_heads, args.seq, args.head_dim, args.group_size);
}

void attention_context_backward(const AttentionContextBackward& args) {
  cpu::attention_context_backward(args.dprobs.f32(), args.dv.f32(), args.dctx_heads.f32(),
                                  args.probs.f32(), args.v.f32(), args.batch_heads, args.seq,
                                  args.head_dim, args.group_size);
}

void flash_attention_forward(const FlashAttentionForward& args) {
  cpu::flash_attention_forward(args.ctx.f32(), args.lse.f32(), args.qkv.f32(), args.dims,
                               document_starts(args.document_starts, args.dims));
}

void flash_attention_backward(const FlashAttentionBackward& args) {
  cpu::flash_attention_backward(args.dqkv.f32(), args.dctx.f32(), args.qkv.f32(), args.ctx.f32(),
                                args.lse.f32(), args.dims,
                                document_starts(args.document_starts, args.dims));
}

void pack_kv(const PackKv& args) {
  cpu::pack_kv(args.kv.f32(), args.qkv.f32(),
               {args.rows, args.micro_batch, args.heads, args.head_dim, args.group_size});
}

void flash_block_forward(const FlashBlockForward& args) {
  cpu::flash_block_forward(args.ctx.f32(), args.lse.f32(), args.qkv.f32(), args.kv.f32(), args.dims,
                           document_starts(args.document_starts, args.dims));
}

void flash_merge(const FlashMerge& args) {
  cpu::flash_merge(args.ctx.f32(), args.lse.f32(), args.ctx_block.f32(), args.lse_block.f32(),
                   {args.rows, args.micro_batch, args.heads, args.head_dim});
}

void flash_block_backward(const FlashBlockBackward& args) {
  cpu::flash_block_backward(args.dq.f32(), args.dkv.f32(), args.dctx.f32(), args.qkv.f32(),
                            args.kv.f32(), args.ctx.f32(), args.lse.f32(), args.dims,
                            document_starts(args.document_starts, args.dims));
}

void assemble_qkv_grad(const AssembleQkvGrad& args) {
  cpu::assemble_qkv_grad(args.dqkv.f32(), args.dq.f32(), args.dkv.f32(),
                         {args.rows, args.micro_batch, args.heads, args.head_dim, args.group_size});
}

void add(const Add& args) {
  cpu::add(args.out.f32(), args.a.f32(), args.b.f32(), args.count);
}

void add_bias(const AddBias& args) {
  cpu::add_bias(args.out.f32(), args.bias.f32(), args.rows, args.cols);
}

void scale_inplace(const ScaleInplace& args) {
  cpu::scale_inplace(args.x.f32(), args.scale, args.count);
}

void init_param(const InitParam& args) {
  TRAINER_ASSERT(args.out.numel() == args.init.rows * args.init.cols,
                 "init_param: " << args.out.numel() << " elements for " << args.init.rows << " x "
                                << args.init.cols);
  cpu::init_param(args.out.f32(), args.init);
}

double sum_squares(const SumSquares& args) {
  return cpu::sum_squares(args.x.f32(), args.count);
}

void convert(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype()) {
    if (dst.raw() != src.raw())
      std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(dst.nbytes()));
  } else if (dst.dtype() == DType::bf16 && src.dtype() == DType::f32) {
    cpu::convert(dst.data<uint16_t>(), src.f32(), src.numel());
  } else if (dst.dtype() == DType::f32 && src.dtype() == DType::bf16) {
    cpu::convert(dst.f32(), src.data<uint16_t>(), src.numel());
  } else {
    TRAINER_ASSERT(false, "convert from " << dtype_name(src.dtype()) << " to "
                                          << dtype_name(dst.dtype()) << ": only f32 <-> bf16");
  }
}

void adamw_step(const AdamwStep& args) {
  cpu::adamw_step(args.param.f32(), args.exp_avg.f32(), args.exp_avg_sq.f32(), args.grad.f32(),
                  args.count, args.hyper);
  if (args.param_copy.defined())
    convert(args.param_copy.view(0, {args.count}), args.param.view(0, {args.count}));
}

void synchronize() {}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.raw() != src.raw()) std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(dst.nbytes()));
}

// Host memory on both sides of a transfer.
void upload(const Tensor& dst, const Tensor& src) {
  copy(dst, src);
}
void download(const Tensor& dst, const Tensor& src) {
  copy(dst, src);
}

void zero(const Tensor& t) {
  if (t.nbytes() > 0) std::memset(t.raw(), 0, static_cast<size_t>(t.nbytes()));
}

double sum(const Tensor& t) {
  double total = 0;
  const float* x = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) total += x[i];
  return total;
}

}  // namespace host

Backend make_host_backend() {
  Backend b{};
#define TRAINER_HOST_ENTRY(result, name, ...) b.name = &host::name;
  TRAINER_OPS(TRAINER_HOST_ENTRY, TRAINER_HOST_ENTRY)
#undef TRAINER_HOST_ENTRY
  return b;
}

// The table that runs ops::`op` on tensor `on` (its argument `field`)'s device.
const Backend& backend_for(const Tensor& on, const char* op, const char* field) {
  TRAINER_ASSERT(on.defined(), "ops::" << op << ": " << field
                                       << " is undefined (the operator runs on its device)");
  switch (on.device()) {
    case DeviceKind::cpu:
      return host_backend();
    case DeviceKind::meta:
      return meta_backend();
    case DeviceKind::cuda:
      break;
  }
  return device_backend(op);
}

}  // namespace

const Backend& host_backend() {
  static const Backend backend = make_host_backend();
  return backend;
}

// ---- the compute operators: each runs on its `on` tensor's device ----
#define TRAINER_OPS_DISPATCH(result, name, Args, on)    \
  result name(const Args& args) {                       \
    return backend_for(args.on, #name, #on).name(args); \
  }
#define TRAINER_OPS_WRITTEN_OUT(...)
TRAINER_OPS(TRAINER_OPS_DISPATCH, TRAINER_OPS_WRITTEN_OUT)
#undef TRAINER_OPS_DISPATCH
#undef TRAINER_OPS_WRITTEN_OUT

// ---- the memory operators ----

void convert(const Tensor& dst, const Tensor& src) {
  TRAINER_ASSERT(
      dst.defined() && src.defined() && dst.numel() == src.numel() && dst.device() == src.device(),
      "ops::convert of " << src.numel() << " elements (" << dtype_name(src.dtype()) << ") into "
                         << dst.numel() << " (" << dtype_name(dst.dtype())
                         << "): needs one element count on one device");
  backend_for(dst, "convert", "dst").convert(dst, src);
}

void synchronize(const Tensor& on) {
  if (on.defined()) backend_for(on, "synchronize", "on").synchronize();
}

void copy(const Tensor& dst, const Tensor& src) {
  TRAINER_ASSERT(
      dst.nbytes() == src.nbytes() && dst.device() == src.device() && dst.dtype() == src.dtype(),
      "ops::copy of " << src.nbytes() << " bytes (" << dtype_name(src.dtype()) << ") into "
                      << dst.nbytes() << " (" << dtype_name(dst.dtype()) << ")");
  backend_for(dst, "copy", "dst").copy(dst, src);
}

void upload(const Tensor& dst, const Tensor& host_src) {
  TRAINER_ASSERT(host_src.device() == DeviceKind::cpu && dst.nbytes() == host_src.nbytes(),
                 "ops::upload of " << host_src.nbytes() << " host bytes into " << dst.nbytes());
  if (dst.device() == DeviceKind::cpu) return copy(dst, host_src);
  backend_for(dst, "upload", "dst").upload(dst, host_src);
}

void download(const Tensor& host_dst, const Tensor& src) {
  TRAINER_ASSERT(
      host_dst.device() == DeviceKind::cpu && host_dst.nbytes() == src.nbytes(),
      "ops::download of " << src.nbytes() << " bytes into " << host_dst.nbytes() << " host bytes");
  if (src.device() == DeviceKind::cpu) return copy(host_dst, src);
  backend_for(src, "download", "src").download(host_dst, src);
}

void zero(const Tensor& t) {
  backend_for(t, "zero", "t").zero(t);
}

double sum(const Tensor& t) {
  return backend_for(t, "sum", "t").sum(t);
}

}  // namespace runtime::ops
