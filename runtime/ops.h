// Device-dispatching operators: the model calls these with tensors, and each
// call runs the kernel of its first required tensor's device (host tensors: the CPU
// kernels of runtime/kernels/cpu, whose headers define the semantics, argument
// order and `=` vs `+=` rules; device tensors: the backend runtime_cuda
// registers). Generated from one list, so the host and device tables match.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cpu/gelu.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace runtime::ops {

// A device backend: one entry per operator, same signature as the function.
struct Backend {
  void (*linear_forward)(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t in_features, int64_t out_features);
  void (*linear_backward)(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, int64_t rows, int64_t in_features, int64_t out_features);
  void (*layernorm_forward)(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t channels, float eps);
  void (*layernorm_backward)(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t channels);
  void (*causal_softmax_forward)(const Tensor& probs, const Tensor& scores, int64_t batch_heads, int64_t T);
  void (*causal_softmax_backward)(const Tensor& dscores, const Tensor& dprobs, const Tensor& probs, int64_t batch_heads, int64_t T);
  void (*gelu_forward)(const Tensor& out, const Tensor& inp, int64_t n, cpu::GeluKind kind);
  void (*gelu_backward)(const Tensor& dinp, const Tensor& dout, const Tensor& inp, int64_t n, cpu::GeluKind kind);
  void (*dropout_hidden_forward)(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t T, int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p, DropoutKey key);
  void (*dropout_attention_forward)(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t B, int64_t H, int64_t T, int64_t head_offset, int64_t sample_offset, float p, DropoutKey key);
  void (*dropout_backward)(const Tensor& dinp, const Tensor& dout, const Tensor& mask, int64_t n, float p);
  void (*embedding_forward)(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows);
  void (*embedding_backward)(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows);
  void (*position_embedding_forward)(const Tensor& out, const Tensor& wpe, int64_t T, int64_t B, int64_t C, int64_t t_offset);
  void (*position_embedding_backward)(const Tensor& dwpe, const Tensor& dout, int64_t T, int64_t B, int64_t C, int64_t t_offset);
  void (*cross_entropy_forward)(const Tensor& losses, const Tensor& lse, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab);
  void (*cross_entropy_backward)(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab, float scale);
  void (*vocab_shard_max)(const Tensor& row_max, const Tensor& logits, int64_t rows, int64_t real_cols, int64_t shard_cols);
  void (*vocab_shard_sum_exp)(const Tensor& row_sum, const Tensor& logits, const Tensor& row_max, int64_t rows, int64_t real_cols, int64_t shard_cols);
  void (*vocab_shard_target_logit)(const Tensor& target_logit, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols);
  void (*vocab_shard_finish)(const Tensor& losses, const Tensor& lse, const Tensor& row_max, int64_t rows);
  void (*vocab_shard_cross_entropy_backward)(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols, float scale);
  void (*split_qkv_heads)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv, int64_t T, int64_t B, int64_t H, int64_t D);
  void (*merge_qkv_heads)(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int64_t T, int64_t B, int64_t H, int64_t D);
  void (*merge_heads)(const Tensor& ctx, const Tensor& ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D);
  void (*split_heads)(const Tensor& ctx_heads, const Tensor& ctx, int64_t T, int64_t B, int64_t H, int64_t D);
  void (*attention_scores_forward)(const Tensor& scores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale);
  void (*attention_scores_backward)(const Tensor& dq, const Tensor& dk, const Tensor& dscores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale);
  void (*attention_context_forward)(const Tensor& ctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D);
  void (*attention_context_backward)(const Tensor& dprobs, const Tensor& dv, const Tensor& dctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D);
  void (*add)(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n);
  void (*add_bias)(const Tensor& out, const Tensor& bias, int64_t rows, int64_t cols);
  void (*scale_inplace)(const Tensor& x, float s, int64_t n);
  double (*sum_squares)(const Tensor& x, int64_t n);    // deterministic, in double
  void (*adamw_step)(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                     const Tensor& grad, int64_t n, const cpu::AdamWParams& hyper,
                     const Tensor& param_copy);
  void (*convert)(const Tensor& dst, const Tensor& src);  // f32 <-> bf16, or a same-dtype copy
  void (*synchronize)();                                 // the host waits for queued work
  void (*copy)(const Tensor& dst, const Tensor& src);  // same device, same dtype, same size
  void (*upload)(const Tensor& device_dst, const Tensor& host_src);    // synchronous
  void (*download)(const Tensor& host_dst, const Tensor& device_src);  // synchronous
  void (*zero)(const Tensor& t);
  double (*sum)(const Tensor& t);                      // in double, on the host when it returns
};

// Every entry of Backend, in order, for code that fills a table one entry per operator:
// X(name) for each. A new operator goes into Backend and into this list.
#define TRAINER_OPS_BACKEND_ENTRIES(X) X(linear_forward) X(linear_backward) X(layernorm_forward) \
  X(layernorm_backward) X(causal_softmax_forward) X(causal_softmax_backward) X(gelu_forward) \
  X(gelu_backward) X(dropout_hidden_forward) X(dropout_attention_forward) X(dropout_backward) \
  X(embedding_forward) X(embedding_backward) X(position_embedding_forward) \
  X(position_embedding_backward) X(cross_entropy_forward) X(cross_entropy_backward) \
  X(vocab_shard_max) X(vocab_shard_sum_exp) X(vocab_shard_target_logit) X(vocab_shard_finish) \
  X(vocab_shard_cross_entropy_backward) X(split_qkv_heads) X(merge_qkv_heads) X(merge_heads) \
  X(split_heads) X(attention_scores_forward) X(attention_scores_backward) \
  X(attention_context_forward) X(attention_context_backward) X(add) X(add_bias) X(scale_inplace) \
  X(sum_squares) X(adamw_step) X(convert) X(synchronize) X(copy) X(upload) X(download) X(zero) \
  X(sum)
#define TRAINER_OPS_COUNT_ENTRY(name) +1
inline constexpr size_t kBackendEntries = 0 TRAINER_OPS_BACKEND_ENTRIES(TRAINER_OPS_COUNT_ENTRY);
static_assert(sizeof(Backend) == kBackendEntries * sizeof(void (*)()),
              "ops::Backend and TRAINER_OPS_BACKEND_ENTRIES list different operators");

// The host kernels as a backend table: what host tensors run. Its entries work on any memory
// the host can address, so a device backend over host memory may reuse it (the tests emulate
// a device this way to run the trainer's device path without a GPU).
const Backend& host_backend();

// Installs the backend of device tensors (runtime_cuda calls this once).
void register_device_backend(const Backend* backend);
// The registered backend; throws LibraryError naming the operator when none is.
const Backend& device_backend(const char* op);

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t in_features, int64_t out_features);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, int64_t rows, int64_t in_features, int64_t out_features);
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t channels, float eps);
void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t channels);
void causal_softmax_forward(const Tensor& probs, const Tensor& scores, int64_t batch_heads, int64_t T);
void causal_softmax_backward(const Tensor& dscores, const Tensor& dprobs, const Tensor& probs, int64_t batch_heads, int64_t T);
void gelu_forward(const Tensor& out, const Tensor& inp, int64_t n, cpu::GeluKind kind);
void gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp, int64_t n, cpu::GeluKind kind);
void dropout_hidden_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t T, int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p, DropoutKey key);
void dropout_attention_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t B, int64_t H, int64_t T, int64_t head_offset, int64_t sample_offset, float p, DropoutKey key);
void dropout_backward(const Tensor& dinp, const Tensor& dout, const Tensor& mask, int64_t n, float p);
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows);
void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows);
void position_embedding_forward(const Tensor& out, const Tensor& wpe, int64_t T, int64_t B, int64_t C, int64_t t_offset);
void position_embedding_backward(const Tensor& dwpe, const Tensor& dout, int64_t T, int64_t B, int64_t C, int64_t t_offset);
void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab);
void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab, int64_t padded_vocab, float scale);
void vocab_shard_max(const Tensor& row_max, const Tensor& logits, int64_t rows, int64_t real_cols, int64_t shard_cols);
void vocab_shard_sum_exp(const Tensor& row_sum, const Tensor& logits, const Tensor& row_max, int64_t rows, int64_t real_cols, int64_t shard_cols);
void vocab_shard_target_logit(const Tensor& target_logit, const Tensor& logits, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols);
void vocab_shard_finish(const Tensor& losses, const Tensor& lse, const Tensor& row_max, int64_t rows);
void vocab_shard_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t rows, int64_t vocab_start, int64_t real_cols, int64_t shard_cols, float scale);
void split_qkv_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv, int64_t T, int64_t B, int64_t H, int64_t D);
void merge_qkv_heads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int64_t T, int64_t B, int64_t H, int64_t D);
void merge_heads(const Tensor& ctx, const Tensor& ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D);
void split_heads(const Tensor& ctx_heads, const Tensor& ctx, int64_t T, int64_t B, int64_t H, int64_t D);
void attention_scores_forward(const Tensor& scores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale);
void attention_scores_backward(const Tensor& dq, const Tensor& dk, const Tensor& dscores, const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D, float scale);
void attention_context_forward(const Tensor& ctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D);
void attention_context_backward(const Tensor& dprobs, const Tensor& dv, const Tensor& dctx_heads, const Tensor& probs, const Tensor& v, int64_t BH, int64_t T, int64_t D);
void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n);
void add_bias(const Tensor& out, const Tensor& bias, int64_t rows, int64_t cols);
void scale_inplace(const Tensor& x, float s, int64_t n);
double sum_squares(const Tensor& x, int64_t n);
// param_copy (optional, f32 or bf16): also set to the updated param in its own dtype (the
// bf16 weights the model computes with, from fp32 master weights), in the same pass.
void adamw_step(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& grad, int64_t n, const cpu::AdamWParams& hyper,
                const Tensor& param_copy = Tensor());
// dst = src converted to dst's dtype (f32 <-> bf16, round to nearest even; same dtype: a
// copy); one device, one element count.
void convert(const Tensor& dst, const Tensor& src);
// Returns when every op queued on `on`'s device so far has finished (host: at once). Timers
// call it: device ops are asynchronous.
void synchronize(const Tensor& on);
void copy(const Tensor& dst, const Tensor& src);
// Between host and device tensors of one size and dtype (a plain copy when both are host).
void upload(const Tensor& dst, const Tensor& host_src);
void download(const Tensor& host_dst, const Tensor& src);
void zero(const Tensor& t);
double sum(const Tensor& t);

}  // namespace runtime::ops
