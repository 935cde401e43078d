// The ops::Backend of CUDA tensors: each entry checks its tensors (Note [CUDA op dtypes]) and
// launches the runtime::cuda kernel on the registered context's stream. Kernels the CUDA side
// lacked (vocab_shard_finish) are here.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "runtime/error.h"
#include "runtime/kernels/cuda/adamw.h"
#include "runtime/kernels/cuda/attention_layout.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/dropout.h"
#include "runtime/kernels/cuda/elementwise.h"
#include "runtime/kernels/cuda/embedding.h"
#include "runtime/kernels/cuda/gelu.h"
#include "runtime/kernels/cuda/layernorm.h"
#include "runtime/kernels/cuda/softmax.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

// Note [CUDA op dtypes]
// In one call, activations and weights share one type, f32 or bf16 (the "activation type",
// set by the first such tensor the op lists). Parameter gradients are f32 whatever that type
// is (linear dweight/dbias, layernorm dweight/dbias, dwte, dwpe: they accumulate over
// micro-batches); so are layernorm mean/rstd and every cross-entropy loss, lse and per-row
// statistic. Dropout masks are u8, token ids and targets i32. A call breaking these rules, or
// passing a host tensor or one smaller than its shape arguments say, fails TRAINER_ASSERT with
// the operator, every argument's dtype and the first problem.

CudaContext* g_context = nullptr;  // process-wide, like ops' backend registry

CudaContext& context() {
  TRAINER_ASSERT(g_context != nullptr, "CUDA backend called with no registered CudaContext");
  return *g_context;
}

// ---- argument checks ----

enum class Role { act, f32, i32, u8 };  // act: the call's activation type

struct Arg {
  const char* name;
  const Tensor* tensor;
  Role role;
  int64_t min_numel;  // elements the kernel touches, from the shape arguments
  bool optional;      // may be undefined (the kernel then skips it)
};

Arg arg(const char* name, const Tensor& tensor, Role role, int64_t min_numel) {
  return Arg{name, &tensor, role, min_numel, false};
}
Arg optional_arg(const char* name, const Tensor& tensor, Role role, int64_t min_numel) {
  return Arg{name, &tensor, role, min_numel, true};
}

DType role_dtype(Role role) {  // of a role other than act
  return role == Role::i32 ? DType::i32 : role == Role::u8 ? DType::u8 : DType::f32;
}

// "out=bf16 inp=f32 bias=none"
std::string describe(std::initializer_list<Arg> args) {
  std::string text;
  for (const Arg& a : args) {
    if (!text.empty()) text += ' ';
    text += a.name;
    text += '=';
    text += a.tensor->defined() ? std::string(dtype_name(a.tensor->dtype())) : "none";
  }
  return text;
}

// Checks every argument of ops::`op` (Note [CUDA op dtypes]); returns the activation type.
DType check_args(const char* op, std::initializer_list<Arg> args) {
  const char* act_source = nullptr;  // the argument that set the activation type
  DType act = DType::f32;
  std::string problem;
  for (const Arg& a : args) {
    const Tensor& t = *a.tensor;
    if (!t.defined()) {
      if (!a.optional) problem = TRAINER_STR(a.name << " is undefined");
    } else if (t.device() != DeviceKind::cuda) {
      problem = TRAINER_STR(a.name << " is a host tensor");
    } else if (a.role == Role::act && act_source == nullptr) {
      act_source = a.name;
      act = t.dtype();
      if (act != DType::f32 && act != DType::bf16)
        problem =
            TRAINER_STR(a.name << " is " << dtype_name(act) << "; activations are f32 or bf16");
    } else if (a.role == Role::act && t.dtype() != act) {
      problem = TRAINER_STR(a.name << " is " << dtype_name(t.dtype()) << " but " << act_source
                                   << " set the activation type " << dtype_name(act));
    } else if (a.role != Role::act && t.dtype() != role_dtype(a.role)) {
      problem = TRAINER_STR(a.name << " is " << dtype_name(t.dtype()) << ", must be "
                                   << dtype_name(role_dtype(a.role)));
    }
    if (problem.empty() && t.defined() && t.numel() < a.min_numel)
      problem = TRAINER_STR(a.name << " has " << t.numel() << " elements, the call needs "
                                   << a.min_numel);
    if (!problem.empty()) break;
  }
  TRAINER_ASSERT(problem.empty(), "ops::" << op << " on CUDA (" << describe(args)
                                          << "): " << problem << " (Note [CUDA op dtypes])");
  return act;
}

// ---- typed pointers ----

// The tensor's data as T*, or null when it is undefined.
template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw()) : nullptr;
}

// act_ptr(t): tensor t's data as the call's activation type T (float or __nv_bfloat16).
template <class T>
struct ActPtr {
  T* operator()(const Tensor& t) const { return ptr<T>(t); }
};

// Calls f(act_ptr, stream): act_ptr an ActPtr<float> or ActPtr<__nv_bfloat16> for the
// activation type, stream the registered context's.
template <class F>
void with_act(DType act, F&& f) {
  if (act == DType::bf16) {
    f(ActPtr<__nv_bfloat16>{}, context().stream());
  } else {
    f(ActPtr<float>{}, context().stream());
  }
}

// ---- kernels the CUDA side lacked ----


// lse = row_max + log(lse) (lse holds the row's sum of exp), losses = lse - losses (losses
// holds the target logit): the twin of cpu::vocab_shard_finish.
__global__ void vocab_shard_finish_kernel(float* losses, float* lse, const float* row_max,
                                          int64_t rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    const float logsumexp = row_max[r] + logf(lse[r]);
    lse[r] = logsumexp;
    losses[r] = logsumexp - losses[r];
  }
}

// The deterministic sum (or sum of squares) of cuda::sum, returned to the host: waits for
// the stream.
template <bool kSquare, class T>
double reduce_to_host(const T* x, int64_t n, CudaContext& c) {
  double* result_device = static_cast<double*>(c.scratch(sizeof(double)));
  if (kSquare) {
    cuda::sum_squares(result_device, x, n, c.stream());
  } else {
    cuda::sum(result_device, x, n, c.stream());
  }
  double result = 0.0;
  TRAINER_CUDA_CHECK(
      cudaMemcpyAsync(&result, result_device, sizeof(double), cudaMemcpyDeviceToHost, c.stream()));
  c.synchronize();
  return result;
}

// ---- the backend's entries, one per ops:: function ----
namespace device_op {

constexpr Role kAct = Role::act;
constexpr Role kF32 = Role::f32;
constexpr Role kI32 = Role::i32;
constexpr Role kU8 = Role::u8;

void add_bias(const Tensor& out, const Tensor& bias, int64_t rows, int64_t cols);

// cuBLASLt's bias epilogue reads the bias vectorized and wants it 16-byte aligned; a bias
// view elsewhere in the flat parameter buffer (C/tp not a multiple of 8 in bf16) is added by
// a pass of its own instead (one more rounding of the bf16 output).
constexpr uintptr_t kBiasEpilogueAlignmentBytes = 16;

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                    int64_t rows, int64_t in_features, int64_t out_features) {
  const DType act =
      check_args("linear_forward", {arg("out", out, kAct, rows * out_features),
                                    arg("inp", inp, kAct, rows * in_features),
                                    arg("weight", weight, kAct, out_features * in_features),
                                    optional_arg("bias", bias, kAct, out_features)});
  const bool fused_bias = bias.defined() &&
                          reinterpret_cast<uintptr_t>(bias.raw()) % kBiasEpilogueAlignmentBytes == 0;
  CudaContext& c = context();
  c.gemm().linear_forward(out.raw(), inp.raw(), weight.raw(), fused_bias ? bias.raw() : nullptr,
                          rows, in_features, out_features, act,
                          fused_bias ? Epilogue::bias : Epilogue::none, nullptr, c.stream());
  if (bias.defined() && !fused_bias) add_bias(out, bias, rows, out_features);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                     const Tensor& dout, const Tensor& inp, const Tensor& weight, int64_t rows,
                     int64_t in_features, int64_t out_features) {
  const DType act =
      check_args("linear_backward", {arg("dout", dout, kAct, rows * out_features),
                                     optional_arg("dinp", dinp, kAct, rows * in_features),
                                     arg("dweight", dweight, kF32, out_features * in_features),
                                     optional_arg("dbias", dbias, kF32, out_features),
                                     arg("inp", inp, kAct, rows * in_features),
                                     arg("weight", weight, kAct, out_features * in_features)});
  CudaContext& c = context();
  c.gemm().linear_backward(ptr<void>(dinp), ptr<float>(dweight), ptr<float>(dbias), dout.raw(),
                           inp.raw(), weight.raw(), rows, in_features, out_features, act,
                           c.stream());
}

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias, int64_t rows, int64_t channels,
                       float eps) {
  const DType act =
      check_args("layernorm_forward",
                 {arg("out", out, kAct, rows * channels), arg("mean", mean, kF32, rows),
                  arg("rstd", rstd, kF32, rows), arg("inp", inp, kAct, rows * channels),
                  arg("weight", weight, kAct, channels), arg("bias", bias, kAct, channels)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::layernorm_forward(act_ptr(out), ptr<float>(mean), ptr<float>(rstd), act_ptr(inp),
                            act_ptr(weight), act_ptr(bias), rows, channels, eps, stream);
  });
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& inp, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t channels) {
  const DType act =
      check_args("layernorm_backward",
                 {arg("dinp", dinp, kAct, rows * channels), arg("dweight", dweight, kF32, channels),
                  arg("dbias", dbias, kF32, channels), arg("dout", dout, kAct, rows * channels),
                  arg("inp", inp, kAct, rows * channels), arg("weight", weight, kAct, channels),
                  arg("mean", mean, kF32, rows), arg("rstd", rstd, kF32, rows)});
  CudaContext& c = context();
  void* scratch = c.scratch(layernorm_backward_scratch_bytes(rows, channels));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::layernorm_backward(act_ptr(dinp), ptr<float>(dweight), ptr<float>(dbias), act_ptr(dout),
                             act_ptr(inp), act_ptr(weight), ptr<float>(mean), ptr<float>(rstd),
                             rows, channels, scratch, stream);
  });
}

void causal_softmax_forward(const Tensor& probs, const Tensor& scores, int64_t batch_heads,
                            int64_t T) {
  const int64_t n = batch_heads * T * T;
  const DType act = check_args("causal_softmax_forward",
                               {arg("probs", probs, kAct, n), arg("scores", scores, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::causal_softmax_forward(act_ptr(probs), act_ptr(scores), batch_heads, T, stream);
  });
}

void causal_softmax_backward(const Tensor& dscores, const Tensor& dprobs, const Tensor& probs,
                             int64_t batch_heads, int64_t T) {
  const int64_t n = batch_heads * T * T;
  const DType act = check_args("causal_softmax_backward",
                               {arg("dscores", dscores, kAct, n), arg("dprobs", dprobs, kAct, n),
                                arg("probs", probs, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::causal_softmax_backward(act_ptr(dscores), act_ptr(dprobs), act_ptr(probs), batch_heads, T,
                                  stream);
  });
}

void gelu_forward(const Tensor& out, const Tensor& inp, int64_t n, cpu::GeluKind kind) {
  const DType act =
      check_args("gelu_forward", {arg("out", out, kAct, n), arg("inp", inp, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::gelu_forward(act_ptr(out), act_ptr(inp), n, kind, stream);
  });
}

void gelu_backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp, int64_t n,
                   cpu::GeluKind kind) {
  const DType act = check_args(
      "gelu_backward",
      {arg("dinp", dinp, kAct, n), arg("dout", dout, kAct, n), arg("inp", inp, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::gelu_backward(act_ptr(dinp), act_ptr(dout), act_ptr(inp), n, kind, stream);
  });
}

void dropout_hidden_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t T,
                            int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key) {
  const int64_t n = T * B * C;
  const DType act =
      check_args("dropout_hidden_forward",
                 {arg("out", out, kAct, n), arg("mask", mask, kU8, n), arg("inp", inp, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_hidden_forward(act_ptr(out), ptr<uint8_t>(mask), act_ptr(inp), T, B, C, t_offset,
                                 sample_offset, p, key, stream);
  });
}

void dropout_attention_forward(const Tensor& out, const Tensor& mask, const Tensor& inp, int64_t B,
                               int64_t H, int64_t T, int64_t head_offset, int64_t sample_offset,
                               float p, DropoutKey key) {
  const int64_t n = B * H * T * T;
  const DType act =
      check_args("dropout_attention_forward",
                 {arg("out", out, kAct, n), arg("mask", mask, kU8, n), arg("inp", inp, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_attention_forward(act_ptr(out), ptr<uint8_t>(mask), act_ptr(inp), B, H, T,
                                    head_offset, sample_offset, p, key, stream);
  });
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const Tensor& mask, int64_t n,
                      float p) {
  const DType act = check_args(
      "dropout_backward",
      {arg("dinp", dinp, kAct, n), arg("dout", dout, kAct, n), arg("mask", mask, kU8, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_backward(act_ptr(dinp), act_ptr(dout), ptr<uint8_t>(mask), n, p, stream);
  });
}

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, int64_t rows,
                       int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  const DType act = check_args("embedding_forward",
                               {arg("out", out, kAct, rows * C), arg("tokens", tokens, kI32, rows),
                                arg("wte", wte, kAct, vocab_rows * C)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::embedding_forward(act_ptr(out), ptr<int32_t>(tokens), act_ptr(wte), rows, C, vocab_start,
                            vocab_rows, stream);
  });
}

void embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  const DType act = check_args("embedding_backward", {arg("dout", dout, kAct, rows * C),
                                                      arg("dwte", dwte, kF32, vocab_rows * C),
                                                      arg("tokens", tokens, kI32, rows)});
  CudaContext& c = context();
  void* scratch = c.scratch(embedding_backward_scratch_bytes(rows, vocab_rows));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::embedding_backward(ptr<float>(dwte), act_ptr(dout), ptr<int32_t>(tokens), rows, C,
                             vocab_start, vocab_rows, scratch, stream);
  });
}

void position_embedding_forward(const Tensor& out, const Tensor& wpe, int64_t T, int64_t B,
                                int64_t C, int64_t t_offset) {
  const DType act =
      check_args("position_embedding_forward",
                 {arg("out", out, kAct, T * B * C), arg("wpe", wpe, kAct, (t_offset + T) * C)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::position_embedding_forward(act_ptr(out), act_ptr(wpe), T, B, C, t_offset, stream);
  });
}

void position_embedding_backward(const Tensor& dwpe, const Tensor& dout, int64_t T, int64_t B,
                                 int64_t C, int64_t t_offset) {
  const DType act =
      check_args("position_embedding_backward",
                 {arg("dout", dout, kAct, T * B * C), arg("dwpe", dwpe, kF32, (t_offset + T) * C)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::position_embedding_backward(ptr<float>(dwpe), act_ptr(dout), T, B, C, t_offset, stream);
  });
}

void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t rows, int64_t vocab,
                           int64_t padded_vocab) {
  const DType act = check_args(
      "cross_entropy_forward",
      {arg("logits", logits, kAct, rows * padded_vocab), arg("losses", losses, kF32, rows),
       arg("lse", lse, kF32, rows), arg("targets", targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::cross_entropy_forward(ptr<float>(losses), ptr<float>(lse), act_ptr(logits),
                                ptr<int32_t>(targets), rows, vocab, padded_vocab, stream);
  });
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale) {
  const int64_t n = rows * padded_vocab;
  const DType act = check_args("cross_entropy_backward",
                               {arg("dlogits", dlogits, kAct, n), arg("logits", logits, kAct, n),
                                arg("lse", lse, kF32, rows), arg("targets", targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::cross_entropy_backward(act_ptr(dlogits), act_ptr(logits), ptr<float>(lse),
                                 ptr<int32_t>(targets), rows, vocab, padded_vocab, scale, stream);
  });
}

void vocab_shard_max(const Tensor& row_max, const Tensor& logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols) {
  const DType act = check_args("vocab_shard_max", {arg("logits", logits, kAct, rows * shard_cols),
                                                   arg("row_max", row_max, kF32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_max(ptr<float>(row_max), act_ptr(logits), rows, real_cols, shard_cols,
                          stream);
  });
}

void vocab_shard_sum_exp(const Tensor& row_sum, const Tensor& logits, const Tensor& row_max,
                         int64_t rows, int64_t real_cols, int64_t shard_cols) {
  const DType act =
      check_args("vocab_shard_sum_exp",
                 {arg("logits", logits, kAct, rows * shard_cols),
                  arg("row_sum", row_sum, kF32, rows), arg("row_max", row_max, kF32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_sum_exp(ptr<float>(row_sum), act_ptr(logits), ptr<float>(row_max), rows,
                              real_cols, shard_cols, stream);
  });
}

void vocab_shard_target_logit(const Tensor& target_logit, const Tensor& logits,
                              const Tensor& targets, int64_t rows, int64_t vocab_start,
                              int64_t real_cols, int64_t shard_cols) {
  const DType act =
      check_args("vocab_shard_target_logit", {arg("logits", logits, kAct, rows * shard_cols),
                                              arg("target_logit", target_logit, kF32, rows),
                                              arg("targets", targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_target_logit(ptr<float>(target_logit), act_ptr(logits), ptr<int32_t>(targets),
                                   rows, vocab_start, real_cols, shard_cols, stream);
  });
}

void vocab_shard_finish(const Tensor& losses, const Tensor& lse, const Tensor& row_max,
                        int64_t rows) {
  check_args("vocab_shard_finish", {arg("losses", losses, kF32, rows), arg("lse", lse, kF32, rows),
                                    arg("row_max", row_max, kF32, rows)});
  if (rows <= 0) return;
  vocab_shard_finish_kernel<<<grid_for(rows), kThreads, 0, context().stream()>>>(
      ptr<float>(losses), ptr<float>(lse), ptr<float>(row_max), rows);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

void vocab_shard_cross_entropy_backward(const Tensor& dlogits, const Tensor& logits,
                                        const Tensor& lse, const Tensor& targets, int64_t rows,
                                        int64_t vocab_start, int64_t real_cols, int64_t shard_cols,
                                        float scale) {
  const int64_t n = rows * shard_cols;
  const DType act = check_args("vocab_shard_cross_entropy_backward",
                               {arg("dlogits", dlogits, kAct, n), arg("logits", logits, kAct, n),
                                arg("lse", lse, kF32, rows), arg("targets", targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_cross_entropy_backward(act_ptr(dlogits), act_ptr(logits), ptr<float>(lse),
                                             ptr<int32_t>(targets), rows, vocab_start, real_cols,
                                             shard_cols, scale, stream);
  });
}

void split_qkv_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                     int64_t T, int64_t B, int64_t H, int64_t D) {
  const int64_t n = B * H * T * D;
  const DType act =
      check_args("split_qkv_heads", {arg("q", q, kAct, n), arg("k", k, kAct, n),
                                     arg("v", v, kAct, n), arg("qkv", qkv, kAct, 3 * n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::split_qkv_heads(act_ptr(q), act_ptr(k), act_ptr(v), act_ptr(qkv), T, B, H, D, stream);
  });
}

void merge_qkv_heads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     int64_t T, int64_t B, int64_t H, int64_t D) {
  const int64_t n = B * H * T * D;
  const DType act =
      check_args("merge_qkv_heads", {arg("dqkv", dqkv, kAct, 3 * n), arg("dq", dq, kAct, n),
                                     arg("dk", dk, kAct, n), arg("dv", dv, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::merge_qkv_heads(act_ptr(dqkv), act_ptr(dq), act_ptr(dk), act_ptr(dv), T, B, H, D, stream);
  });
}

void merge_heads(const Tensor& ctx, const Tensor& ctx_heads, int64_t T, int64_t B, int64_t H,
                 int64_t D) {
  const int64_t n = T * B * H * D;
  const DType act =
      check_args("merge_heads", {arg("ctx", ctx, kAct, n), arg("ctx_heads", ctx_heads, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::merge_heads(act_ptr(ctx), act_ptr(ctx_heads), T, B, H, D, stream);
  });
}

void split_heads(const Tensor& ctx_heads, const Tensor& ctx, int64_t T, int64_t B, int64_t H,
                 int64_t D) {
  const int64_t n = T * B * H * D;
  const DType act =
      check_args("split_heads", {arg("ctx_heads", ctx_heads, kAct, n), arg("ctx", ctx, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::split_heads(act_ptr(ctx_heads), act_ptr(ctx), T, B, H, D, stream);
  });
}

void attention_scores_forward(const Tensor& scores, const Tensor& q, const Tensor& k, int64_t BH,
                              int64_t T, int64_t D, float scale) {
  const DType act = check_args("attention_scores_forward",
                               {arg("scores", scores, kAct, BH * T * T),
                                arg("q", q, kAct, BH * T * D), arg("k", k, kAct, BH * T * D)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_scores_forward(act_ptr(scores), act_ptr(q), act_ptr(k), BH, T, D, scale,
                                   c.cublas(), stream);
  });
}

void attention_scores_backward(const Tensor& dq, const Tensor& dk, const Tensor& dscores,
                               const Tensor& q, const Tensor& k, int64_t BH, int64_t T, int64_t D,
                               float scale) {
  const int64_t n = BH * T * D;
  const DType act =
      check_args("attention_scores_backward", {arg("dq", dq, kAct, n), arg("dk", dk, kAct, n),
                                               arg("dscores", dscores, kAct, BH * T * T),
                                               arg("q", q, kAct, n), arg("k", k, kAct, n)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_scores_backward(act_ptr(dq), act_ptr(dk), act_ptr(dscores), act_ptr(q),
                                    act_ptr(k), BH, T, D, scale, c.cublas(), stream);
  });
}

void attention_context_forward(const Tensor& ctx_heads, const Tensor& probs, const Tensor& v,
                               int64_t BH, int64_t T, int64_t D) {
  const DType act =
      check_args("attention_context_forward",
                 {arg("ctx_heads", ctx_heads, kAct, BH * T * D),
                  arg("probs", probs, kAct, BH * T * T), arg("v", v, kAct, BH * T * D)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_context_forward(act_ptr(ctx_heads), act_ptr(probs), act_ptr(v), BH, T, D,
                                    c.cublas(), stream);
  });
}

void attention_context_backward(const Tensor& dprobs, const Tensor& dv, const Tensor& dctx_heads,
                                const Tensor& probs, const Tensor& v, int64_t BH, int64_t T,
                                int64_t D) {
  const int64_t n = BH * T * D;
  const DType act = check_args("attention_context_backward",
                               {arg("dprobs", dprobs, kAct, BH * T * T), arg("dv", dv, kAct, n),
                                arg("dctx_heads", dctx_heads, kAct, n),
                                arg("probs", probs, kAct, BH * T * T), arg("v", v, kAct, n)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_context_backward(act_ptr(dprobs), act_ptr(dv), act_ptr(dctx_heads),
                                     act_ptr(probs), act_ptr(v), BH, T, D, c.cublas(), stream);
  });
}

void add(const Tensor& out, const Tensor& a, const Tensor& b, int64_t n) {
  const DType act =
      check_args("add", {arg("out", out, kAct, n), arg("a", a, kAct, n), arg("b", b, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::add(act_ptr(out), act_ptr(a), act_ptr(b), n, stream);
  });
}

void add_bias(const Tensor& out, const Tensor& bias, int64_t rows, int64_t cols) {
  const DType act =
      check_args("add_bias", {arg("out", out, kAct, rows * cols), arg("bias", bias, kAct, cols)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::add_bias(act_ptr(out), act_ptr(bias), rows, cols, stream);
  });
}

void scale_inplace(const Tensor& x, float s, int64_t n) {
  const DType act = check_args("scale_inplace", {arg("x", x, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::scale_inplace(act_ptr(x), s, n, stream);
  });
}

// f32 (the gradients) or bf16; deterministic and synchronizing, see reduce_to_host.
double sum_squares(const Tensor& x, int64_t n) {
  const DType act = check_args("sum_squares", {arg("x", x, kAct, n)});
  if (act == DType::f32) return reduce_to_host<true>(ptr<float>(x), n, context());
  return reduce_to_host<true>(ptr<__nv_bfloat16>(x), n, context());
}

// fp32 master params, moments and grads, as on the CPU; param_copy (optional) f32 or bf16.
void adamw_step(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& grad, int64_t n, const cpu::AdamWParams& hyper,
                const Tensor& param_copy) {
  check_args("adamw_step", {arg("param", param, kF32, n), arg("exp_avg", exp_avg, kF32, n),
                            arg("exp_avg_sq", exp_avg_sq, kF32, n), arg("grad", grad, kF32, n)});
  const cudaStream_t stream = context().stream();
  if (param_copy.defined() && param_copy.dtype() == DType::bf16) {
    check_args("adamw_step", {arg("param_copy", param_copy, kAct, n)});
    cuda::adamw_step(ptr<float>(param), ptr<float>(exp_avg), ptr<float>(exp_avg_sq),
                     ptr<__nv_bfloat16>(param_copy), ptr<float>(grad), n, hyper, stream);
    return;
  }
  cuda::adamw_step(ptr<float>(param), ptr<float>(exp_avg), ptr<float>(exp_avg_sq), ptr<float>(grad),
                   n, hyper, stream);
  if (param_copy.defined()) {
    check_args("adamw_step", {arg("param_copy", param_copy, kF32, n)});
    TRAINER_CUDA_CHECK(cudaMemcpyAsync(param_copy.raw(), param.raw(), static_cast<size_t>(n) * 4,
                                       cudaMemcpyDeviceToDevice, stream));
  }
}

// f32 <-> bf16 (round to nearest even) or a same-dtype copy; ops::convert checked the count.
void convert(const Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  check_args("convert", {arg("dst", dst, dst.dtype() == DType::f32 ? kF32 : kAct, n),
                         arg("src", src, src.dtype() == DType::f32 ? kF32 : kAct, n)});
  if (dst.dtype() == src.dtype()) {
    TRAINER_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()),
                                       cudaMemcpyDeviceToDevice, context().stream()));
  } else if (dst.dtype() == DType::bf16) {
    cuda::convert(ptr<__nv_bfloat16>(dst), ptr<float>(src), n, context().stream());
  } else {
    cuda::convert(ptr<float>(dst), ptr<__nv_bfloat16>(src), n, context().stream());
  }
}

void synchronize() { context().synchronize(); }

// dst and src defined, on the given devices, of one dtype and byte size.
void check_transfer(const char* op, const Tensor& dst, DeviceKind dst_device, const Tensor& src,
                    DeviceKind src_device) {
  auto describe_one = [](const Tensor& t, DeviceKind device) {  // "bf16 on cpu (want cuda)"
    const std::string want = device == DeviceKind::cuda ? "cuda" : "cpu";
    if (!t.defined()) return "none (want " + want + ")";
    return TRAINER_STR(dtype_name(t.dtype()) << " " << t.nbytes() << " bytes on "
                                             << (t.device() == DeviceKind::cuda ? "cuda" : "cpu")
                                             << " (want " << want << ")");
  };
  TRAINER_ASSERT(dst.defined() && src.defined() && dst.device() == dst_device &&
                     src.device() == src_device && dst.dtype() == src.dtype() &&
                     dst.nbytes() == src.nbytes(),
                 "ops::" << op << " on CUDA: dst " << describe_one(dst, dst_device) << ", src "
                         << describe_one(src, src_device) << "; needs one dtype and size");
}

// Host to device, stream-ordered after the ops queued before it; returns when the copy is
// done (host_src may then change).
void upload(const Tensor& device_dst, const Tensor& host_src) {
  check_transfer("upload", device_dst, DeviceKind::cuda, host_src, DeviceKind::cpu);
  if (device_dst.nbytes() == 0) return;
  CudaContext& c = context();
  TRAINER_CUDA_CHECK(cudaMemcpyAsync(device_dst.raw(), host_src.raw(),
                                     static_cast<size_t>(device_dst.nbytes()),
                                     cudaMemcpyHostToDevice, c.stream()));
  c.synchronize();
}

// Device to host after the ops queued before it; returns when host_dst holds the data.
void download(const Tensor& host_dst, const Tensor& device_src) {
  check_transfer("download", host_dst, DeviceKind::cpu, device_src, DeviceKind::cuda);
  if (host_dst.nbytes() == 0) return;
  CudaContext& c = context();
  TRAINER_CUDA_CHECK(cudaMemcpyAsync(host_dst.raw(), device_src.raw(),
                                     static_cast<size_t>(host_dst.nbytes()), cudaMemcpyDeviceToHost,
                                     c.stream()));
  c.synchronize();
}

// Any dtype; dst and src the same dtype and size (ops::copy checked size and device).
void copy(const Tensor& dst, const Tensor& src) {
  check_transfer("copy", dst, DeviceKind::cuda, src, DeviceKind::cuda);
  if (dst.raw() == src.raw() || dst.nbytes() == 0) return;
  TRAINER_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(dst.nbytes()),
                                     cudaMemcpyDeviceToDevice, context().stream()));
}

// Any dtype: every byte 0.
void zero(const Tensor& t) {
  TRAINER_ASSERT(
      t.defined() && t.device() == DeviceKind::cuda,
      "ops::zero on CUDA of " << (t.defined() ? "a host tensor" : "an undefined tensor"));
  if (t.nbytes() == 0) return;
  TRAINER_CUDA_CHECK(
      cudaMemsetAsync(t.raw(), 0, static_cast<size_t>(t.nbytes()), context().stream()));
}

// f32 or bf16 (the CPU twin takes f32 only); deterministic, see reduce_to_host.
double sum(const Tensor& t) {
  const DType act = check_args("sum", {arg("t", t, kAct, 0)});
  double result = 0.0;
  with_act(act, [&](auto act_ptr, cudaStream_t) {
    result = reduce_to_host<false>(act_ptr(t), t.numel(), context());
  });
  return result;
}

}  // namespace device_op

ops::Backend make_backend() {
  ops::Backend b{};
#define TRAINER_CUDA_ENTRY(name) b.name = &device_op::name;
  TRAINER_OPS_BACKEND_ENTRIES(TRAINER_CUDA_ENTRY)
#undef TRAINER_CUDA_ENTRY
  return b;
}

}  // namespace

CudaContext::CudaContext() = default;

CudaContext::~CudaContext() {
  if (g_context == this) {
    g_context = nullptr;
    ops::register_device_backend(nullptr);
  }
  // Stream-ordered, after every op queued on the stream; errors are ignored (a destructor
  // must not throw, and at process exit the driver may already be gone).
  if (scratch_ != nullptr) cudaFreeAsync(scratch_, stream_.get());
}

void* CudaContext::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  const size_t grown = bytes > 2 * scratch_bytes_ ? bytes : 2 * scratch_bytes_;
  if (scratch_ != nullptr) TRAINER_CUDA_CHECK(cudaFreeAsync(scratch_, stream_.get()));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  scratch_ = malloc_async_retrying(grown, stream_.get());
  scratch_bytes_ = grown;
  return scratch_;
}

void register_cuda_backend(CudaContext& context) {
  static const ops::Backend backend = make_backend();
  g_context = &context;
  ops::register_device_backend(&backend);
}

}  // namespace runtime::cuda
