// The CUDA backend's entries (cuda_op_entries.h) of the Llama-family blocks: RMSNorm, SwiGLU,
// the rotary embedding and the query and key heads' norms. Each checks its tensors (Note [CUDA op
// dtypes]: rstd and dweight are f32, the rest the activation type) and launches its kernel on the
// context's stream.
#include <cuda_bf16.h>

#include <cstdint>

#include "runtime/kernels/cuda/cuda_op_entries.h"
#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/kernels/cuda/scratch_sizes.h"
#include "runtime/kernels/cuda/swiglu.h"

namespace runtime::cuda::device_op {

void rmsnorm_forward(const ops::RmsnormForward& args) {
  const int64_t rows = args.rows, channels = args.channels;
  const DType act = check_args("rmsnorm_forward", {arg("out", args.out, kAct, rows * channels),
                                                   arg("rstd", args.rstd, kF32, rows),
                                                   arg("input", args.input, kAct, rows * channels),
                                                   arg("weight", args.weight, kAct, channels)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::rmsnorm_forward(act_ptr(args.out), ptr<float>(args.rstd), act_ptr(args.input),
                          act_ptr(args.weight), rows, channels, args.eps, stream);
  });
}

void rmsnorm_backward(const ops::RmsnormBackward& args) {
  const int64_t rows = args.rows, channels = args.channels;
  const DType act = check_args(
      "rmsnorm_backward",
      {arg("dinput", args.dinput, kAct, rows * channels),
       arg("dweight", args.dweight, kF32, channels), arg("dout", args.dout, kAct, rows * channels),
       arg("input", args.input, kAct, rows * channels), arg("weight", args.weight, kAct, channels),
       arg("rstd", args.rstd, kF32, rows)});
  void* scratch = context().scratch(scratch_bytes::rmsnorm_backward(args));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::rmsnorm_backward(act_ptr(args.dinput), ptr<float>(args.dweight), act_ptr(args.dout),
                           act_ptr(args.input), act_ptr(args.weight), ptr<float>(args.rstd), rows,
                           channels, scratch, stream);
  });
}

void swiglu_forward(const ops::SwigluForward& args) {
  const int64_t n = args.rows * args.ffn;
  const DType act = check_args(
      "swiglu_forward", {arg("out", args.out, kAct, n), arg("input", args.input, kAct, 2 * n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::swiglu_forward(act_ptr(args.out), act_ptr(args.input), args.rows, args.ffn, stream);
  });
}

void swiglu_backward(const ops::SwigluBackward& args) {
  const int64_t n = args.rows * args.ffn;
  const DType act = check_args(
      "swiglu_backward", {arg("dinput", args.dinput, kAct, 2 * n), arg("dout", args.dout, kAct, n),
                          arg("input", args.input, kAct, 2 * n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::swiglu_backward(act_ptr(args.dinput), act_ptr(args.dout), act_ptr(args.input), args.rows,
                          args.ffn, stream);
  });
}

namespace {

// Elements of a rotary call's qkv: seq * micro_batch * kv_heads * (group_size + 2) * head_dim.
template <class Args>
int64_t qkv_elements(const Args& args) {
  return args.seq * args.micro_batch * args.kv_heads * (args.group_size + 2) * args.head_dim;
}

template <class Args>
RopeDims rope_dims(const Args& args) {
  return RopeDims{args.seq,        args.micro_batch, args.kv_heads,
                  args.group_size, args.head_dim,    args.seq_offset,
                  args.base,       args.scaling,     ptr<const int32_t>(args.document_starts)};
}

}  // namespace

void rope_forward(const ops::RopeForward& args) {
  const DType act =
      check_args("rope_forward", {arg("qkv", args.qkv, kAct, qkv_elements(args)),
                                  document_arg(args.document_starts, args.seq, args.micro_batch)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::rope_forward(act_ptr(args.qkv), rope_dims(args), stream);
  });
}

void rope_backward(const ops::RopeBackward& args) {
  const DType act =
      check_args("rope_backward", {arg("dqkv", args.dqkv, kAct, qkv_elements(args)),
                                   document_arg(args.document_starts, args.seq, args.micro_batch)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::rope_backward(act_ptr(args.dqkv), rope_dims(args), stream);
  });
}

namespace {

cuda::QkHeadsShape qk_heads(const ops::QkNormHeads& h) {
  return {h.rows, h.kv_heads, h.group_size, h.head_dim};
}

}  // namespace

void qk_norm_forward(const ops::QkNormForward& args) {
  const ops::QkNormHeads& h = args.heads;
  const DType act =
      check_args("qk_norm_forward", {arg("qkv", args.qkv, kAct, h.rows * h.qkv_width()),
                                     arg("input", args.input, kAct, h.count() * h.head_dim),
                                     arg("rstd", args.rstd, kF32, h.count()),
                                     arg("q_weight", args.q_weight, kAct, h.head_dim),
                                     arg("k_weight", args.k_weight, kAct, h.head_dim)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::qk_norm_forward(act_ptr(args.qkv), act_ptr(args.input), ptr<float>(args.rstd),
                          act_ptr(args.q_weight), act_ptr(args.k_weight), qk_heads(args.heads),
                          args.eps, stream);
  });
}

void qk_norm_backward(const ops::QkNormBackward& args) {
  const ops::QkNormHeads& h = args.heads;
  const DType act =
      check_args("qk_norm_backward", {arg("dqkv", args.dqkv, kAct, h.rows * h.qkv_width()),
                                      arg("dq_weight", args.dq_weight, kF32, h.head_dim),
                                      arg("dk_weight", args.dk_weight, kF32, h.head_dim),
                                      arg("input", args.input, kAct, h.count() * h.head_dim),
                                      arg("rstd", args.rstd, kF32, h.count()),
                                      arg("q_weight", args.q_weight, kAct, h.head_dim),
                                      arg("k_weight", args.k_weight, kAct, h.head_dim)});
  void* scratch = context().scratch(scratch_bytes::qk_norm_backward(args));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::qk_norm_backward(act_ptr(args.dqkv), ptr<float>(args.dq_weight),
                           ptr<float>(args.dk_weight), act_ptr(args.input), ptr<float>(args.rstd),
                           act_ptr(args.q_weight), act_ptr(args.k_weight), qk_heads(args.heads),
                           scratch, stream);
  });
}

}  // namespace runtime::cuda::device_op
