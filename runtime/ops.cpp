// Dispatch of runtime/ops.h: host tensors run the CPU kernels, device tensors
// the registered backend. Generated from one list with ops.h.
#include "runtime/ops.h"

#include <algorithm>
#include <cstring>

#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/convert.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/elementwise.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/kernels/cpu/layernorm.h"
#include "runtime/kernels/cpu/softmax.h"
#include "runtime/kernels/cpu/vocab_parallel.h"

namespace runtime::ops {
namespace {
const Backend* g_device_backend = nullptr;  // process-wide: one device kind per process
}  // namespace

void register_device_backend(const Backend* backend) { g_device_backend = backend; }

const Backend& device_backend(const char* op) {
  if (g_device_backend == nullptr) {
    throw LibraryError(std::string("ops::") + op + " on a device tensor, but no device backend is registered");
  }
  return *g_device_backend;
}

namespace {

// ---- the host kernels: any memory the host can address ----
namespace host {

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t in_features, int64_t out_features) {
  cpu::linear_forward(out.f32(), inp.f32(), weight.f32(), (bias.defined() ? bias.f32() : nullptr), rows, in_features, out_features);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, int64_t rows, int64_t in_features, int64_t out_features) {
  cpu::linear_backward((dinp.defined() ? dinp.f32() : nullptr), dweight.f32(), (dbias.defined() ? dbias.f32() : nullptr), dout.f32(), inp.f32(), weight.f32(), rows, in_features, out_features);
}

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t channels, float eps) {
  cpu::layernorm_forward(out.f32(), mean.f32(), rstd.f32(), inp.f32(), weight.f32(), bias.f32(), rows, channels, eps);
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t channels) {
  cpu::layernorm_backward(dinp.f32(), dweight.f32(), dbias.f32(), dout.f32(), inp.f32(), weight.f32(), mean.f32(), rstd.f32(), rows, channels);
}

void causal_softmax_forward(const Tensor& probs, const Tensor& scores, int64_t batch_heads, int64_t T) {
  cpu::causal_softmax_forward(probs.f32(), scores.f32(), batch_heads, T);
}

void causal_softmax_backward(const Tensor& dscores, const Tensor& dprobs, const Tensor& probs, int64_t batch_heads, int64_t T) {
  cpu::causal_softmax_backward(dscores.f32(), dprobs.f32(), probs.f32(), batch_heads, T);
}

void gelu_forward(const Tensor& out, const Tensor& inp, int64_t n, cpu::GeluKind kind) {
  cpu::gelu_forward(out.f32(), inp.f32(), n, kind);
}

void gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp, int64_t n, cpu::GeluKind kind) {
  cpu::gelu_backward(dinp.f32(), dout.f32(), inp.f32(), n, kind);
}

void dropout_hidden_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t T, int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p, DropoutKey key) {
  cpu::dropout_hidden_forward(out.f32(), mask.u8(), inp.f32(), T, B, C, t_offset, sample_offset, p, key);
}

void dropout_attention_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t B, int64_t H, int64_t T, int64_t head_offset, int64_t sample_offset, float p, DropoutKey key) {
  cpu::dropout_attention_forward(out.f32(), mask.u8(), inp.f32(), B, H, T, head_offset, sample_offset, p, key);
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const Tensor& mask, int64_t n, float p) {
  cpu::dropout_backward(dinp.f32(), dout.f32(), mask.u8(), n, p);
}

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  cpu::embedding_forward(out.f32(), tokens.i32(), wte.f32(), rows, C, vocab_start, vocab_rows);
}

void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  cpu::embedding_backward(dwte.f32(), dout.f32(), tokens.i32(), rows, C, vocab_start, vocab_rows);
}

void position_embedding_forward(const Tensor& out, const Tensor& wpe, int64_t T, int64_t B, int64_t C, int64_t t_offset) {
  cpu::position_embedding_forward(out.f32(), wpe.f32(), T, B, C, t_offset);
}

void position_embedding_backward(const Tensor& dwpe, const Tensor& dout, int64_t T, int64_t B, int64_t C, int64_t t_offset) {
  cpu::position_embedding_backward(dwpe.f32(), dout.f32(), T, B, C, t_offset);
}

void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab) {
  cpu::cross_entropy_forward(losses.f32(), lse.f32(), logits.f32(), targets.i32(), rows, vocab, padded_vocab);
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab, float scale) {
  cpu::cross_entropy_backward(dlogits.f32(), logits.f32(), lse.f32(), targets.i32(), rows, vocab, padded_vocab, scale);
}

void vocab_shard_max(const Tensor& row_max, const Tensor& logits, int64_t rows, int64_t real_cols, int64_t shard_cols) {
  cpu::vocab_shard_max(row_max.f32(), logits.f32(), rows, real_cols, shard_cols);
}

void vocab_shard_sum_exp(const Tensor& row_sum, const Tensor& logits, const Tensor& row_max, int64_t rows, int64_t real_cols, int64_t shard_cols) {
  cpu::vocab_shard_sum_exp(row_sum.f32(), logits.f32(), row_max.f32(), rows, real_cols, shard_cols);
}

void vocab_shard_target_logit(const Tensor& target_logit, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols) {
  cpu::vocab_shard_target_logit(target_logit.f32(), logits.f32(), targets.i32(), rows, vocab_start, real_cols, shard_cols);
}

void vocab_shard_finish(const Tensor& losses, const Tensor& lse, const Tensor& row_max, int64_t rows) {
  cpu::vocab_shard_finish(losses.f32(), lse.f32(), row_max.f32(), rows);
}

void vocab_shard_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols, float scale) {
  cpu::vocab_shard_cross_entropy_backward(dlogits.f32(), logits.f32(), lse.f32(), targets.i32(), rows, vocab_start, real_cols, shard_cols, scale);
}

void split_qkv_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv, int64_t T, int64_t B, int64_t H, int64_t D) {
  cpu::split_qkv_heads(q.f32(), k.f32(), v.f32(), qkv.f32(), T, B, H, D);
}

void merge_qkv_heads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int64_t T, int64_t B, int64_t H, int64_t D) {
  cpu::merge_qkv_heads(dqkv.f32(), dq.f32(), dk.f32(), dv.f32(), T, B, H, D);
}

void merge_heads(const Tensor& ctx, const Tensor& ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D) {
  cpu::merge_heads(ctx.f32(), ctx_heads.f32(), T, B, H, D);
}

void split_heads(const Tensor& ctx_heads, const Tensor& ctx, int64_t T, int64_t B, int64_t H, int64_t D) {
  cpu::split_heads(ctx_heads.f32(), ctx.f32(), T, B, H, D);
}

void attention_scores_forward(const Tensor& scores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale) {
  cpu::attention_scores_forward(scores.f32(), q.f32(), k.f32(), BH, T, D, scale);
}

void attention_scores_backward(const Tensor& dq, const Tensor& dk, const Tensor& dscores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale) {
  cpu::attention_scores_backward(dq.f32(), dk.f32(), dscores.f32(), q.f32(), k.f32(), BH, T, D, scale);
}

void attention_context_forward(const Tensor& ctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D) {
  cpu::attention_context_forward(ctx_heads.f32(), probs.f32(), v.f32(), BH, T, D);
}

void attention_context_backward(const Tensor& dprobs, const Tensor& dv, const Tensor& dctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D) {
  cpu::attention_context_backward(dprobs.f32(), dv.f32(), dctx_heads.f32(), probs.f32(), v.f32(), BH, T, D);
}

void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
  cpu::add(out.f32(), a.f32(), b.f32(), n);
}

void add_bias(const Tensor& out, const Tensor& bias, int64_t rows, int64_t cols) {
  cpu::add_bias(out.f32(), bias.f32(), rows, cols);
}

void scale_inplace(const Tensor& x, float s, int64_t n) {
  cpu::scale_inplace(x.f32(), s, n);
}

double sum_squares(const Tensor& x, int64_t n) {
  return cpu::sum_squares(x.f32(), n);
}

void convert(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype()) {
    if (dst.raw() != src.raw()) std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(dst.nbytes()));
  } else if (dst.dtype() == DType::bf16 && src.dtype() == DType::f32) {
    cpu::convert(dst.data<uint16_t>(), src.f32(), src.numel());
  } else if (dst.dtype() == DType::f32 && src.dtype() == DType::bf16) {
    cpu::convert(dst.f32(), src.data<uint16_t>(), src.numel());
  } else {
    TRAINER_ASSERT(false, "convert from " << dtype_name(src.dtype()) << " to "
                                          << dtype_name(dst.dtype()) << ": only f32 <-> bf16");
  }
}

void adamw_step(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& grad, int64_t n, const cpu::AdamWParams& hyper,
                const Tensor& param_copy) {
  cpu::adamw_step(param.f32(), exp_avg.f32(), exp_avg_sq.f32(), grad.f32(), n, hyper);
  if (param_copy.defined()) convert(param_copy.view(0, {n}), param.view(0, {n}));
}

void synchronize() {}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.raw() != src.raw()) std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(dst.nbytes()));
}

// Host memory on both sides of a transfer.
void upload(const Tensor& dst, const Tensor& src) { copy(dst, src); }
void download(const Tensor& dst, const Tensor& src) { copy(dst, src); }

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
#define TRAINER_HOST_ENTRY(name) b.name = &host::name;
  TRAINER_OPS_BACKEND_ENTRIES(TRAINER_HOST_ENTRY)
#undef TRAINER_HOST_ENTRY
  return b;
}

// The table that runs ops::`op` on tensor t's device.
const Backend& backend_for(const Tensor& t, const char* op) {
  return t.device() == DeviceKind::cpu ? host_backend() : device_backend(op);
}

}  // namespace

const Backend& host_backend() {
  static const Backend backend = make_host_backend();
  return backend;
}


void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t in_features, int64_t out_features) {
  backend_for(out, "linear_forward").linear_forward(out, inp, weight, bias, rows, in_features, out_features);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, int64_t rows, int64_t in_features, int64_t out_features) {
  // dinp is optional: dispatch on the weight gradient, which is always there.
  backend_for(dweight, "linear_backward").linear_backward(dinp, dweight, dbias, dout, inp, weight, rows, in_features, out_features);
}

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t channels, float eps) {
  backend_for(out, "layernorm_forward").layernorm_forward(out, mean, rstd, inp, weight, bias, rows, channels, eps);
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t channels) {
  backend_for(dinp, "layernorm_backward").layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels);
}

void causal_softmax_forward(const Tensor& probs, const Tensor& scores, int64_t batch_heads, int64_t T) {
  backend_for(probs, "causal_softmax_forward").causal_softmax_forward(probs, scores, batch_heads, T);
}

void causal_softmax_backward(const Tensor& dscores, const Tensor& dprobs, const Tensor& probs, int64_t batch_heads, int64_t T) {
  backend_for(dscores, "causal_softmax_backward").causal_softmax_backward(dscores, dprobs, probs, batch_heads, T);
}

void gelu_forward(const Tensor& out, const Tensor& inp, int64_t n, cpu::GeluKind kind) {
  backend_for(out, "gelu_forward").gelu_forward(out, inp, n, kind);
}

void gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp, int64_t n, cpu::GeluKind kind) {
  backend_for(dinp, "gelu_backward").gelu_backward(dinp, dout, inp, n, kind);
}

void dropout_hidden_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t T, int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p, DropoutKey key) {
  backend_for(out, "dropout_hidden_forward").dropout_hidden_forward(out, mask, inp, T, B, C, t_offset, sample_offset, p, key);
}

void dropout_attention_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t B, int64_t H, int64_t T, int64_t head_offset, int64_t sample_offset, float p, DropoutKey key) {
  backend_for(out, "dropout_attention_forward").dropout_attention_forward(out, mask, inp, B, H, T, head_offset, sample_offset, p, key);
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const Tensor& mask, int64_t n, float p) {
  backend_for(dinp, "dropout_backward").dropout_backward(dinp, dout, mask, n, p);
}

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  backend_for(out, "embedding_forward").embedding_forward(out, tokens, wte, rows, C, vocab_start, vocab_rows);
}

void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  backend_for(dwte, "embedding_backward").embedding_backward(dwte, dout, tokens, rows, C, vocab_start, vocab_rows);
}

void position_embedding_forward(const Tensor& out, const Tensor& wpe, int64_t T, int64_t B, int64_t C, int64_t t_offset) {
  backend_for(out, "position_embedding_forward").position_embedding_forward(out, wpe, T, B, C, t_offset);
}

void position_embedding_backward(const Tensor& dwpe, const Tensor& dout, int64_t T, int64_t B, int64_t C, int64_t t_offset) {
  backend_for(dwpe, "position_embedding_backward").position_embedding_backward(dwpe, dout, T, B, C, t_offset);
}

void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab) {
  backend_for(losses, "cross_entropy_forward").cross_entropy_forward(losses, lse, logits, targets, rows, vocab, padded_vocab);
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab, float scale) {
  backend_for(dlogits, "cross_entropy_backward").cross_entropy_backward(dlogits, logits, lse, targets, rows, vocab, padded_vocab, scale);
}

void vocab_shard_max(const Tensor& row_max, const Tensor& logits, int64_t rows, int64_t real_cols, int64_t shard_cols) {
  backend_for(row_max, "vocab_shard_max").vocab_shard_max(row_max, logits, rows, real_cols, shard_cols);
}

void vocab_shard_sum_exp(const Tensor& row_sum, const Tensor& logits, const Tensor& row_max, int64_t rows, int64_t real_cols, int64_t shard_cols) {
  backend_for(row_sum, "vocab_shard_sum_exp").vocab_shard_sum_exp(row_sum, logits, row_max, rows, real_cols, shard_cols);
}

void vocab_shard_target_logit(const Tensor& target_logit, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols) {
  backend_for(target_logit, "vocab_shard_target_logit").vocab_shard_target_logit(target_logit, logits, targets, rows, vocab_start, real_cols, shard_cols);
}

void vocab_shard_finish(const Tensor& losses, const Tensor& lse, const Tensor& row_max, int64_t rows) {
  backend_for(losses, "vocab_shard_finish").vocab_shard_finish(losses, lse, row_max, rows);
}

void vocab_shard_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols, float scale) {
  backend_for(dlogits, "vocab_shard_cross_entropy_backward").vocab_shard_cross_entropy_backward(dlogits, logits, lse, targets, rows, vocab_start, real_cols, shard_cols, scale);
}

void split_qkv_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv, int64_t T, int64_t B, int64_t H, int64_t D) {
  backend_for(q, "split_qkv_heads").split_qkv_heads(q, k, v, qkv, T, B, H, D);
}

void merge_qkv_heads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int64_t T, int64_t B, int64_t H, int64_t D) {
  backend_for(dqkv, "merge_qkv_heads").merge_qkv_heads(dqkv, dq, dk, dv, T, B, H, D);
}

void merge_heads(const Tensor& ctx, const Tensor& ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D) {
  backend_for(ctx, "merge_heads").merge_heads(ctx, ctx_heads, T, B, H, D);
}

void split_heads(const Tensor& ctx_heads, const Tensor& ctx, int64_t T, int64_t B, int64_t H, int64_t D) {
  backend_for(ctx_heads, "split_heads").split_heads(ctx_heads, ctx, T, B, H, D);
}

void attention_scores_forward(const Tensor& scores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale) {
  backend_for(scores, "attention_scores_forward").attention_scores_forward(scores, q, k, BH, T, D, scale);
}

void attention_scores_backward(const Tensor& dq, const Tensor& dk, const Tensor& dscores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale) {
  backend_for(dq, "attention_scores_backward").attention_scores_backward(dq, dk, dscores, q, k, BH, T, D, scale);
}

void attention_context_forward(const Tensor& ctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D) {
  backend_for(ctx_heads, "attention_context_forward").attention_context_forward(ctx_heads, probs, v, BH, T, D);
}

void attention_context_backward(const Tensor& dprobs, const Tensor& dv, const Tensor& dctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D) {
  backend_for(dprobs, "attention_context_backward").attention_context_backward(dprobs, dv, dctx_heads, probs, v, BH, T, D);
}

void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
  backend_for(out, "add").add(out, a, b, n);
}

void add_bias(const Tensor& out, const Tensor& bias, int64_t rows, int64_t cols) {
  backend_for(out, "add_bias").add_bias(out, bias, rows, cols);
}

void scale_inplace(const Tensor& x, float s, int64_t n) {
  backend_for(x, "scale_inplace").scale_inplace(x, s, n);
}

double sum_squares(const Tensor& x, int64_t n) {
  return backend_for(x, "sum_squares").sum_squares(x, n);
}

void adamw_step(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& grad, int64_t n, const cpu::AdamWParams& hyper,
                const Tensor& param_copy) {
  backend_for(param, "adamw_step").adamw_step(param, exp_avg, exp_avg_sq, grad, n, hyper, param_copy);
}

void convert(const Tensor& dst, const Tensor& src) {
  TRAINER_ASSERT(dst.defined() && src.defined() && dst.numel() == src.numel() &&
                     dst.device() == src.device(),
                 "ops::convert of " << src.numel() << " elements (" << dtype_name(src.dtype())
                               << ") into " << dst.numel() << " (" << dtype_name(dst.dtype())
                               << "): needs one element count on one device");
  backend_for(dst, "convert").convert(dst, src);
}

void synchronize(const Tensor& on) {
  if (on.defined()) backend_for(on, "synchronize").synchronize();
}

void copy(const Tensor& dst, const Tensor& src) {
  TRAINER_ASSERT(dst.nbytes() == src.nbytes() && dst.device() == src.device() &&
                     dst.dtype() == src.dtype(),
                 "ops::copy of " << src.nbytes() << " bytes (" << dtype_name(src.dtype()) << ") into "
                            << dst.nbytes() << " (" << dtype_name(dst.dtype()) << ")");
  backend_for(dst, "copy").copy(dst, src);
}

void upload(const Tensor& dst, const Tensor& host_src) {
  TRAINER_ASSERT(host_src.device() == DeviceKind::cpu && dst.nbytes() == host_src.nbytes(),
                 "ops::upload of " << host_src.nbytes() << " host bytes into " << dst.nbytes());
  if (dst.device() == DeviceKind::cpu) return copy(dst, host_src);
  device_backend("upload").upload(dst, host_src);
}

void download(const Tensor& host_dst, const Tensor& src) {
  TRAINER_ASSERT(host_dst.device() == DeviceKind::cpu && host_dst.nbytes() == src.nbytes(),
                 "ops::download of " << src.nbytes() << " bytes into " << host_dst.nbytes() << " host bytes");
  if (src.device() == DeviceKind::cpu) return copy(host_dst, src);
  device_backend("download").download(host_dst, src);
}

void zero(const Tensor& t) { backend_for(t, "zero").zero(t); }

double sum(const Tensor& t) { return backend_for(t, "sum").sum(t); }

}  // namespace runtime::ops
