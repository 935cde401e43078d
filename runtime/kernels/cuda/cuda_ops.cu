// The ops::Backend of CUDA tensors: each entry (cuda_op_entries.h; the attention ones in
// cuda_attention_ops.cu, the Llama-family ones in cuda_llama_ops.cu) checks its tensors (Note
// [CUDA op dtypes]) and launches the runtime::cuda kernel on the registered context's stream.
// Kernels the CUDA side lacked (vocab_shard_finish) are here, and the CudaContext.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "runtime/device_scratch.h"
#include "runtime/error.h"
#include "runtime/kernels/cuda/adamw.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/cuda_op_entries.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/dropout.h"
#include "runtime/kernels/cuda/elementwise.h"
#include "runtime/kernels/cuda/embedding.h"
#include "runtime/kernels/cuda/gelu.h"
#include "runtime/kernels/cuda/layernorm.h"
#include "runtime/kernels/cuda/scratch_sizes.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

CudaContext* g_context = nullptr;  // process-wide, like ops' backend registry

// ---- kernels the CUDA side lacked ----

// lse = row_max + log(lse) (lse holds the row's sum of exp), losses = lse - losses (losses
// holds the target logit; 0 on a kIgnoredTarget row): the twin of cpu::vocab_shard_finish.
__global__ void vocab_shard_finish_kernel(float* losses, float* lse, const float* row_max,
                                          const int32_t* targets, int64_t rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    const float logsumexp = row_max[r] + logf(lse[r]);
    lse[r] = logsumexp;
    losses[r] = targets[r] == kIgnoredTarget ? 0.f : logsumexp - losses[r];
  }
}

// The deterministic sum (or sum of squares) of cuda::sum, returned to the host: waits for
// the stream. Scratch: the result, then the partial sums.
template <bool kSquare, class T>
double reduce_to_host(const T* x, int64_t n, CudaContext& c) {
  double* result_device = static_cast<double*>(c.scratch(scratch_bytes::reduction(n)));
  if (kSquare) {
    cuda::sum_squares(result_device, x, n, c.stream(), result_device + 1);
  } else {
    cuda::sum(result_device, x, n, c.stream(), result_device + 1);
  }
  double result = 0.0;
  TRAINER_CUDA_CHECK(
      cudaMemcpyAsync(&result, result_device, sizeof(double), cudaMemcpyDeviceToHost, c.stream()));
  c.synchronize();
  return result;
}

}  // namespace

// ---- the backend's entries (cuda_op_entries.h; the attention ones: cuda_attention_ops.cu) ----
namespace device_op {

using namespace ::runtime::cuda::device;  // device_common.cuh

CudaContext& context() {
  TRAINER_ASSERT(g_context != nullptr, "CUDA backend called with no registered CudaContext");
  return *g_context;
}

namespace {

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

}  // namespace

// Checks every argument of ops::`op` (Note [CUDA op dtypes]).
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

// cuBLASLt's bias epilogue reads the bias vectorized and wants it 16-byte aligned; a bias
// view elsewhere in the flat parameter buffer (C/tp not a multiple of 8 in bf16) is added by
// a pass of its own instead (one more rounding of the bf16 output).
constexpr uintptr_t kBiasEpilogueAlignmentBytes = 16;

void linear_forward(const ops::LinearForward& args) {
  const int64_t rows = args.rows, in_features = args.in_features;
  const int64_t out_features = args.out_features;
  const DType act =
      check_args("linear_forward", {arg("out", args.out, kAct, rows * out_features),
                                    arg("input", args.input, kAct, rows * in_features),
                                    arg("weight", args.weight, kAct, out_features * in_features),
                                    optional_arg("bias", args.bias, kAct, out_features)});
  const Tensor& bias = args.bias;
  const bool fused_bias =
      bias.defined() && reinterpret_cast<uintptr_t>(bias.raw()) % kBiasEpilogueAlignmentBytes == 0;
  CudaContext& c = context();
  c.gemm().linear_forward(args.out.raw(), args.input.raw(), args.weight.raw(),
                          fused_bias ? bias.raw() : nullptr, rows, in_features, out_features, act,
                          fused_bias ? Epilogue::bias : Epilogue::none, nullptr, c.stream());
  if (bias.defined() && !fused_bias) {
    device_op::add_bias(ops::AddBias{args.out, bias, rows, out_features});
  }
}

void linear_backward(const ops::LinearBackward& args) {
  const int64_t rows = args.rows, in_features = args.in_features;
  const int64_t out_features = args.out_features;
  const DType act =
      check_args("linear_backward", {arg("dout", args.dout, kAct, rows * out_features),
                                     optional_arg("dinput", args.dinput, kAct, rows * in_features),
                                     arg("dweight", args.dweight, kF32, out_features * in_features),
                                     optional_arg("dbias", args.dbias, kF32, out_features),
                                     arg("input", args.input, kAct, rows * in_features),
                                     arg("weight", args.weight, kAct, out_features * in_features)});
  CudaContext& c = context();
  float* dbias_scratch = args.dbias.defined()
                             ? static_cast<float*>(c.scratch(scratch_bytes::linear_backward(args)))
                             : nullptr;
  c.gemm().linear_backward(ptr<void>(args.dinput), ptr<float>(args.dweight), ptr<float>(args.dbias),
                           args.dout.raw(), args.input.raw(), args.weight.raw(), rows, in_features,
                           out_features, act, c.stream(), dbias_scratch);
}

void gelu_forward(const ops::GeluForward& args);
void gelu_backward(const ops::GeluBackward& args);

// Note [MLP epilogues]: cuBLASLt's GELU is the tanh form, its aux wants a leading dim that is
// a multiple of 8, its bias 16-byte alignment (kBiasEpilogueAlignmentBytes).
bool gelu_epilogue_fits(cpu::GeluKind kind, int64_t aux_ld) {
  return kind == cpu::GeluKind::tanh && aux_ld % 8 == 0;
}

void linear_gelu_forward(const ops::LinearGeluForward& args) {
  const int64_t rows = args.rows, in_features = args.in_features;
  const int64_t out_features = args.out_features;
  const DType act = check_args(
      "linear_gelu_forward", {arg("out", args.out, kAct, rows * out_features),
                              arg("pre_activation", args.pre_activation, kAct, rows * out_features),
                              arg("input", args.input, kAct, rows * in_features),
                              arg("weight", args.weight, kAct, out_features * in_features),
                              arg("bias", args.bias, kAct, out_features)});
  const bool aligned_bias =
      reinterpret_cast<uintptr_t>(args.bias.raw()) % kBiasEpilogueAlignmentBytes == 0;
  CudaContext& c = context();
  if (aligned_bias && gelu_epilogue_fits(args.kind, out_features) &&
      c.gemm().linear_forward(args.out.raw(), args.input.raw(), args.weight.raw(), args.bias.raw(),
                              rows, in_features, out_features, act, Epilogue::bias_gelu_aux,
                              args.pre_activation.raw(), c.stream()))
    return;
  device_op::linear_forward(ops::LinearForward{.out = args.pre_activation,
                                               .input = args.input,
                                               .weight = args.weight,
                                               .bias = args.bias,
                                               .rows = rows,
                                               .in_features = in_features,
                                               .out_features = out_features});
  device_op::gelu_forward(ops::GeluForward{.out = args.out,
                                           .input = args.pre_activation,
                                           .count = rows * out_features,
                                           .kind = args.kind});
}

// dinput and pre_bias by the gelu_gradient epilogue (or the unfused product, GELU backward and
// column sums), then dweight and dbias as linear_backward takes them.
void gelu_linear_backward(const ops::GeluLinearBackward& args) {
  const int64_t rows = args.rows, in_features = args.in_features;
  const int64_t out_features = args.out_features;
  const DType act =
      check_args("gelu_linear_backward",
                 {arg("dout", args.dout, kAct, rows * out_features),
                  arg("dinput", args.dinput, kAct, rows * in_features),
                  arg("dweight", args.dweight, kF32, out_features * in_features),
                  optional_arg("dbias", args.dbias, kF32, out_features),
                  arg("pre_bias", args.pre_bias, kF32, in_features),
                  arg("input", args.input, kAct, rows * in_features),
                  arg("weight", args.weight, kAct, out_features * in_features),
                  arg("pre_activation", args.pre_activation, kAct, rows * in_features)});
  CudaContext& c = context();
  float* scratch = static_cast<float*>(c.scratch(scratch_bytes::gelu_linear_backward(args)));
  const bool fused =
      gelu_epilogue_fits(args.kind, in_features) &&
      c.gemm().input_gradient_through_gelu(
          args.dinput.raw(), ptr<float>(args.pre_bias), args.dout.raw(), args.weight.raw(),
          args.pre_activation.raw(), rows, in_features, out_features, act, c.stream(), scratch);
  c.gemm().linear_backward(fused ? nullptr : args.dinput.raw(), ptr<float>(args.dweight),
                           ptr<float>(args.dbias), args.dout.raw(), args.input.raw(),
                           args.weight.raw(), rows, in_features, out_features, act, c.stream(),
                           args.dbias.defined() ? scratch : nullptr);
  if (fused) return;
  device_op::gelu_backward(ops::GeluBackward{.dinput = args.dinput,
                                             .dout = args.dinput,
                                             .input = args.pre_activation,
                                             .count = rows * in_features,
                                             .kind = args.kind});
  column_sums_accumulate(ptr<float>(args.pre_bias), args.dinput.raw(), rows, in_features, act,
                         c.stream());
}

void layernorm_forward(const ops::LayernormForward& args) {
  const int64_t rows = args.rows, channels = args.channels;
  const DType act = check_args(
      "layernorm_forward",
      {arg("out", args.out, kAct, rows * channels), arg("mean", args.mean, kF32, rows),
       arg("rstd", args.rstd, kF32, rows), arg("input", args.input, kAct, rows * channels),
       arg("weight", args.weight, kAct, channels), arg("bias", args.bias, kAct, channels)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::layernorm_forward(act_ptr(args.out), ptr<float>(args.mean), ptr<float>(args.rstd),
                            act_ptr(args.input), act_ptr(args.weight), act_ptr(args.bias), rows,
                            channels, args.eps, stream);
  });
}

void layernorm_backward(const ops::LayernormBackward& args) {
  const int64_t rows = args.rows, channels = args.channels;
  const DType act = check_args(
      "layernorm_backward",
      {arg("dinput", args.dinput, kAct, rows * channels),
       arg("dweight", args.dweight, kF32, channels), arg("dbias", args.dbias, kF32, channels),
       arg("dout", args.dout, kAct, rows * channels),
       arg("input", args.input, kAct, rows * channels), arg("weight", args.weight, kAct, channels),
       arg("mean", args.mean, kF32, rows), arg("rstd", args.rstd, kF32, rows)});
  CudaContext& c = context();
  void* scratch = c.scratch(scratch_bytes::layernorm_backward(args));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::layernorm_backward(act_ptr(args.dinput), ptr<float>(args.dweight), ptr<float>(args.dbias),
                             act_ptr(args.dout), act_ptr(args.input), act_ptr(args.weight),
                             ptr<float>(args.mean), ptr<float>(args.rstd), rows, channels, scratch,
                             stream);
  });
}

void gelu_forward(const ops::GeluForward& args) {
  const int64_t n = args.count;
  const DType act = check_args("gelu_forward",
                               {arg("out", args.out, kAct, n), arg("input", args.input, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::gelu_forward(act_ptr(args.out), act_ptr(args.input), n, args.kind, stream);
  });
}

void gelu_backward(const ops::GeluBackward& args) {
  const int64_t n = args.count;
  const DType act = check_args(
      "gelu_backward", {arg("dinput", args.dinput, kAct, n), arg("dout", args.dout, kAct, n),
                        arg("input", args.input, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::gelu_backward(act_ptr(args.dinput), act_ptr(args.dout), act_ptr(args.input), n, args.kind,
                        stream);
  });
}

void dropout_hidden_forward(const ops::DropoutHiddenForward& args) {
  const int64_t n = args.seq * args.micro_batch * args.channels;
  const DType act = check_args("dropout_hidden_forward",
                               {arg("out", args.out, kAct, n), arg("mask", args.mask, kU8, n),
                                arg("input", args.input, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_hidden_forward(act_ptr(args.out), ptr<uint8_t>(args.mask), act_ptr(args.input),
                                 args.seq, args.micro_batch, args.channels, args.seq_offset,
                                 args.sample_offset, args.drop_probability, args.key, stream);
  });
}

void dropout_add_hidden_forward(const ops::DropoutAddHiddenForward& args) {
  const int64_t n = args.seq * args.micro_batch * args.channels;
  const DType act =
      check_args("dropout_add_hidden_forward",
                 {arg("out", args.out, kAct, n), arg("mask", args.mask, kU8, n),
                  arg("residual", args.residual, kAct, n), arg("input", args.input, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_add_hidden_forward(act_ptr(args.out), ptr<uint8_t>(args.mask),
                                     act_ptr(args.residual), act_ptr(args.input), args.seq,
                                     args.micro_batch, args.channels, args.seq_offset,
                                     args.sample_offset, args.drop_probability, args.key, stream);
  });
}

void dropout_attention_forward(const ops::DropoutAttentionForward& args) {
  const int64_t n = args.micro_batch * args.heads * args.seq * args.seq;
  const DType act = check_args("dropout_attention_forward",
                               {arg("out", args.out, kAct, n), arg("mask", args.mask, kU8, n),
                                arg("input", args.input, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_attention_forward(act_ptr(args.out), ptr<uint8_t>(args.mask), act_ptr(args.input),
                                    args.micro_batch, args.heads, args.seq, args.head_offset,
                                    args.sample_offset, args.drop_probability, args.key, stream);
  });
}

void dropout_backward(const ops::DropoutBackward& args) {
  const int64_t n = args.count;
  const DType act = check_args(
      "dropout_backward", {arg("dinput", args.dinput, kAct, n), arg("dout", args.dout, kAct, n),
                           arg("mask", args.mask, kU8, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::dropout_backward(act_ptr(args.dinput), act_ptr(args.dout), ptr<uint8_t>(args.mask), n,
                           args.drop_probability, stream);
  });
}

void embedding_forward(const ops::EmbeddingForward& args) {
  const int64_t rows = args.rows, channels = args.channels;
  const DType act =
      check_args("embedding_forward", {arg("out", args.out, kAct, rows * channels),
                                       arg("tokens", args.tokens, kI32, rows),
                                       arg("wte", args.wte, kAct, args.vocab_rows * channels)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::embedding_forward(act_ptr(args.out), ptr<int32_t>(args.tokens), act_ptr(args.wte), rows,
                            channels, args.vocab_start, args.vocab_rows, stream);
  });
}

void embedding_backward(const ops::EmbeddingBackward& args) {
  const int64_t rows = args.rows, channels = args.channels;
  const DType act =
      check_args("embedding_backward", {arg("dout", args.dout, kAct, rows * channels),
                                        arg("dwte", args.dwte, kF32, args.vocab_rows * channels),
                                        arg("tokens", args.tokens, kI32, rows)});
  CudaContext& c = context();
  void* scratch = c.scratch(scratch_bytes::embedding_backward(args));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::embedding_backward(ptr<float>(args.dwte), act_ptr(args.dout), ptr<int32_t>(args.tokens),
                             rows, channels, args.vocab_start, args.vocab_rows, scratch, stream);
  });
}

void position_embedding_forward(const ops::PositionEmbeddingForward& args) {
  const int64_t channels = args.channels;
  const DType act = check_args("position_embedding_forward",
                               {arg("out", args.out, kAct, args.seq * args.micro_batch * channels),
                                arg("wpe", args.wpe, kAct, (args.seq_offset + args.seq) * channels),
                                document_arg(args.document_starts, args.seq, args.micro_batch)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::position_embedding_forward(act_ptr(args.out), act_ptr(args.wpe), args.seq,
                                     args.micro_batch, channels, args.seq_offset,
                                     ptr<const int32_t>(args.document_starts), stream);
  });
}

void position_embedding_backward(const ops::PositionEmbeddingBackward& args) {
  const int64_t channels = args.channels;
  const DType act =
      check_args("position_embedding_backward",
                 {arg("dout", args.dout, kAct, args.seq * args.micro_batch * channels),
                  arg("dwpe", args.dwpe, kF32, (args.seq_offset + args.seq) * channels),
                  document_arg(args.document_starts, args.seq, args.micro_batch)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::position_embedding_backward(ptr<float>(args.dwpe), act_ptr(args.dout), args.seq,
                                      args.micro_batch, channels, args.seq_offset,
                                      ptr<const int32_t>(args.document_starts), stream);
  });
}

void cross_entropy_forward(const ops::CrossEntropyForward& args) {
  const int64_t rows = args.rows;
  const DType act =
      check_args("cross_entropy_forward",
                 {arg("logits", args.logits, kAct, rows * args.padded_vocab),
                  arg("losses", args.losses, kF32, rows), arg("lse", args.lse, kF32, rows),
                  arg("targets", args.targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::cross_entropy_forward(ptr<float>(args.losses), ptr<float>(args.lse), act_ptr(args.logits),
                                ptr<int32_t>(args.targets), rows, args.vocab, args.padded_vocab,
                                stream);
  });
}

void cross_entropy_backward(const ops::CrossEntropyBackward& args) {
  const int64_t rows = args.rows, n = rows * args.padded_vocab;
  const DType act =
      check_args("cross_entropy_backward",
                 {arg("dlogits", args.dlogits, kAct, n), arg("logits", args.logits, kAct, n),
                  arg("lse", args.lse, kF32, rows), arg("targets", args.targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::cross_entropy_backward(act_ptr(args.dlogits), act_ptr(args.logits), ptr<float>(args.lse),
                                 ptr<int32_t>(args.targets), rows, args.vocab, args.padded_vocab,
                                 args.scale, stream);
  });
}

void vocab_shard_max(const ops::VocabShardMax& args) {
  const int64_t rows = args.rows;
  const DType act =
      check_args("vocab_shard_max", {arg("logits", args.logits, kAct, rows * args.shard_cols),
                                     arg("row_max", args.row_max, kF32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_max(ptr<float>(args.row_max), act_ptr(args.logits), rows, args.real_cols,
                          args.shard_cols, stream);
  });
}

void vocab_shard_sum_exp(const ops::VocabShardSumExp& args) {
  const int64_t rows = args.rows;
  const DType act =
      check_args("vocab_shard_sum_exp", {arg("logits", args.logits, kAct, rows * args.shard_cols),
                                         arg("row_sum", args.row_sum, kF32, rows),
                                         arg("row_max", args.row_max, kF32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_sum_exp(ptr<float>(args.row_sum), act_ptr(args.logits),
                              ptr<float>(args.row_max), rows, args.real_cols, args.shard_cols,
                              stream);
  });
}

void vocab_shard_target_logit(const ops::VocabShardTargetLogit& args) {
  const int64_t rows = args.rows;
  const DType act = check_args("vocab_shard_target_logit",
                               {arg("logits", args.logits, kAct, rows * args.shard_cols),
                                arg("target_logit", args.target_logit, kF32, rows),
                                arg("targets", args.targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_target_logit(ptr<float>(args.target_logit), act_ptr(args.logits),
                                   ptr<int32_t>(args.targets), rows, args.vocab_start,
                                   args.real_cols, args.shard_cols, stream);
  });
}

void vocab_shard_finish(const ops::VocabShardFinish& args) {
  const int64_t rows = args.rows;
  check_args("vocab_shard_finish",
             {arg("losses", args.losses, kF32, rows), arg("lse", args.lse, kF32, rows),
              arg("row_max", args.row_max, kF32, rows), arg("targets", args.targets, kI32, rows)});
  if (rows <= 0) return;
  vocab_shard_finish_kernel<<<grid_for(rows), kThreads, 0, context().stream()>>>(
      ptr<float>(args.losses), ptr<float>(args.lse), ptr<float>(args.row_max),
      ptr<int32_t>(args.targets), rows);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

void vocab_shard_cross_entropy_backward(const ops::VocabShardCrossEntropyBackward& args) {
  const int64_t rows = args.rows, n = rows * args.shard_cols;
  const DType act =
      check_args("vocab_shard_cross_entropy_backward",
                 {arg("dlogits", args.dlogits, kAct, n), arg("logits", args.logits, kAct, n),
                  arg("lse", args.lse, kF32, rows), arg("targets", args.targets, kI32, rows)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::vocab_shard_cross_entropy_backward(act_ptr(args.dlogits), act_ptr(args.logits),
                                             ptr<float>(args.lse), ptr<int32_t>(args.targets), rows,
                                             args.vocab_start, args.real_cols, args.shard_cols,
                                             args.scale, stream);
  });
}

void add(const ops::Add& args) {
  const int64_t n = args.count;
  const DType act = check_args(
      "add", {arg("out", args.out, kAct, n), arg("a", args.a, kAct, n), arg("b", args.b, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::add(act_ptr(args.out), act_ptr(args.a), act_ptr(args.b), n, stream);
  });
}

void add_bias(const ops::AddBias& args) {
  const DType act = check_args("add_bias", {arg("out", args.out, kAct, args.rows * args.cols),
                                            arg("bias", args.bias, kAct, args.cols)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::add_bias(act_ptr(args.out), act_ptr(args.bias), args.rows, args.cols, stream);
  });
}

void scale_inplace(const ops::ScaleInplace& args) {
  const DType act = check_args("scale_inplace", {arg("x", args.x, kAct, args.count)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::scale_inplace(act_ptr(args.x), args.scale, args.count, stream);
  });
}

// f32 (the gradients) or bf16; deterministic and synchronizing, see reduce_to_host.
double sum_squares(const ops::SumSquares& args) {
  const DType act = check_args("sum_squares", {arg("x", args.x, kAct, args.count)});
  if (act == DType::f32) return reduce_to_host<true>(ptr<float>(args.x), args.count, context());
  return reduce_to_host<true>(ptr<__nv_bfloat16>(args.x), args.count, context());
}

// f32, as on the CPU (master weights; the compute copy is converted from them).
void init_param(const ops::InitParam& args) {
  check_args("init_param", {arg("out", args.out, kF32, args.init.rows * args.init.cols)});
  cuda::init_param(ptr<float>(args.out), args.init, context().stream());
}

// fp32 master params, moments and grads, as on the CPU; param_copy (optional) f32 or bf16.
void adamw_step(const ops::AdamwStep& args) {
  const int64_t n = args.count;
  check_args("adamw_step",
             {arg("param", args.param, kF32, n), arg("exp_avg", args.exp_avg, kF32, n),
              arg("exp_avg_sq", args.exp_avg_sq, kF32, n), arg("grad", args.grad, kF32, n)});
  const cudaStream_t stream = context().stream();
  const Tensor& param_copy = args.param_copy;
  if (param_copy.defined() && param_copy.dtype() == DType::bf16) {
    check_args("adamw_step", {arg("param_copy", param_copy, kAct, n)});
    cuda::adamw_step(ptr<float>(args.param), ptr<float>(args.exp_avg), ptr<float>(args.exp_avg_sq),
                     ptr<__nv_bfloat16>(param_copy), ptr<float>(args.grad), n, args.hyper, stream);
    return;
  }
  cuda::adamw_step(ptr<float>(args.param), ptr<float>(args.exp_avg), ptr<float>(args.exp_avg_sq),
                   ptr<float>(args.grad), n, args.hyper, stream);
  if (param_copy.defined()) {
    check_args("adamw_step", {arg("param_copy", param_copy, kF32, n)});
    TRAINER_CUDA_CHECK(cudaMemcpyAsync(param_copy.raw(), args.param.raw(),
                                       static_cast<size_t>(n) * 4, cudaMemcpyDeviceToDevice,
                                       stream));
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

void synchronize() {
  context().synchronize();
}

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
  context().upload(device_dst.raw(), host_src.raw(), static_cast<size_t>(device_dst.nbytes()));
}

// Device to host after the ops queued before it; returns when host_dst holds the data.
void download(const Tensor& host_dst, const Tensor& device_src) {
  check_transfer("download", host_dst, DeviceKind::cpu, device_src, DeviceKind::cuda);
  if (host_dst.nbytes() == 0) return;
  context().download(host_dst.raw(), device_src.raw(), static_cast<size_t>(host_dst.nbytes()));
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

namespace {

ops::Backend make_backend() {
  ops::Backend b{};
#define TRAINER_CUDA_ENTRY(result, name, ...) b.name = &device_op::name;
  TRAINER_OPS(TRAINER_CUDA_ENTRY, TRAINER_CUDA_ENTRY)
#undef TRAINER_CUDA_ENTRY
  return b;
}

}  // namespace

CudaContext::CudaContext() = default;

CudaContext::~CudaContext() {
  if (g_context == this) {
    g_context = nullptr;
    ops::register_device_backend(nullptr);
    register_device_scratch_sizes(nullptr);
  }
  // Stream-ordered, after every op queued on the stream; errors are ignored (a destructor
  // must not throw, and at process exit the driver may already be gone).
  if (scratch_ != nullptr && allocator_ == nullptr) cudaFreeAsync(scratch_, stream_.get());
  if (scratch_ != nullptr && allocator_ != nullptr)
    allocator_->deallocate(scratch_, static_cast<int64_t>(scratch_bytes_),
                           MemoryCategory::workspace);
  for (void* chunk : pinned_)  // transfers return only once their copies are done
    if (chunk != nullptr) cudaFreeHost(chunk);
}

// The caching allocator's free block is reused by the next op on stream() only, after the work
// queued before (Note [Caching allocator and streams]): freeing it at once is stream-ordered.
void CudaContext::release_scratch() {
  if (scratch_ == nullptr) return;
  if (allocator_ != nullptr) {
    allocator_->deallocate(scratch_, static_cast<int64_t>(scratch_bytes_),
                           MemoryCategory::workspace);
  } else {
    TRAINER_CUDA_CHECK(cudaFreeAsync(scratch_, stream_.get()));
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
}

void* CudaContext::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  const size_t grown = grown_scratch_bytes(scratch_bytes_, bytes);
  release_scratch();
  scratch_ = allocator_ != nullptr
                 ? allocator_->allocate(static_cast<int64_t>(grown), MemoryCategory::workspace)
                 : malloc_async_retrying(grown, stream_.get());
  scratch_bytes_ = grown;
  return scratch_;
}

// Note [Pinned transfers]
// A copy from pageable host memory is staged by the driver through a small pinned buffer of
// its own, chunk after chunk. Transfers of more than one chunk go through the context's two
// pinned chunks instead, pipelined: the host copies one chunk while the copy engine moves the
// other (each chunk's event says when its last copy is done). Smaller ones copy directly.
constexpr size_t kPinnedChunkBytes = size_t{16} << 20;

void CudaContext::allocate_pinned() {
  for (void*& chunk : pinned_)
    if (chunk == nullptr) TRAINER_CUDA_CHECK(cudaHostAlloc(&chunk, kPinnedChunkBytes, 0));
}

void CudaContext::upload(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes <= kPinnedChunkBytes) {
    TRAINER_CUDA_CHECK(
        cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
    synchronize();
    return;
  }
  allocate_pinned();
  for (size_t offset = 0, chunk = 0; offset < bytes; offset += kPinnedChunkBytes, ++chunk) {
    const size_t slot = chunk % 2, n = std::min(kPinnedChunkBytes, bytes - offset);
    staged_[slot].synchronize();  // its previous chunk has reached the device
    std::memcpy(pinned_[slot], static_cast<const char*>(host_src) + offset, n);
    TRAINER_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(device_dst) + offset, pinned_[slot], n,
                                       cudaMemcpyHostToDevice, stream()));
    staged_[slot].record(stream());
  }
  synchronize();
}

void CudaContext::download(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes <= kPinnedChunkBytes) {
    TRAINER_CUDA_CHECK(
        cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream()));
    synchronize();
    return;
  }
  allocate_pinned();
  const size_t chunks = (bytes + kPinnedChunkBytes - 1) / kPinnedChunkBytes;
  auto chunk_bytes = [&](size_t chunk) {
    return std::min(kPinnedChunkBytes, bytes - chunk * kPinnedChunkBytes);
  };
  auto queue = [&](size_t chunk) {
    TRAINER_CUDA_CHECK(cudaMemcpyAsync(
        pinned_[chunk % 2], static_cast<const char*>(device_src) + chunk * kPinnedChunkBytes,
        chunk_bytes(chunk), cudaMemcpyDeviceToHost, stream()));
    staged_[chunk % 2].record(stream());
  };
  queue(0);
  if (chunks > 1) queue(1);
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    staged_[chunk % 2].synchronize();
    std::memcpy(static_cast<char*>(host_dst) + chunk * kPinnedChunkBytes, pinned_[chunk % 2],
                chunk_bytes(chunk));
    if (chunk + 2 < chunks) queue(chunk + 2);
  }
}

void CudaContext::use_allocator(Allocator* allocator) {
  TRAINER_ASSERT(allocator == nullptr || allocator->device() == DeviceKind::cuda,
                 "CudaContext scratch from an allocator of host memory");
  release_scratch();
  allocator_ = allocator;
}

void register_cuda_backend(CudaContext& context) {
  static const ops::Backend backend = make_backend();
  g_context = &context;
  ops::register_device_backend(&backend);
  register_device_scratch_sizes(&scratch_bytes::table());
}

}  // namespace runtime::cuda
