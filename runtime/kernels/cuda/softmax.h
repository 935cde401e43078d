// Causal softmax over attention scores (batch_heads, T, T) on the device: the CUDA twin of
// runtime/kernels/cpu/softmax.h, taking its mask (cpu::SoftmaxMask, document_starts on the
// device). Both directions assign (=), write exact 0 above the diagonal, left of a sliding
// window of mask.window > 0 columns (row i sees i - window < j <= i: Note [Sliding window] in
// runtime/op_args.h) and before the row's document start (Note [Document masking]), and may run
// in place; bf16 tensors are read and written in bf16, math is fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/kernels/cpu/softmax.h"

namespace runtime::cuda {

// probs = causal_softmax(scores) over the visible columns; probs may alias scores.
void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T,
                            const cpu::SoftmaxMask& mask, cudaStream_t stream);
void causal_softmax_forward(__nv_bfloat16* probs, const __nv_bfloat16* scores, int64_t batch_heads,
                            int64_t T, const cpu::SoftmaxMask& mask, cudaStream_t stream);

// dscores = probs * (dprobs - rowsum(dprobs * probs)) on the visible columns, 0 elsewhere (=).
// dscores may alias dprobs.
void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T, const cpu::SoftmaxMask& mask,
                             cudaStream_t stream);
void causal_softmax_backward(__nv_bfloat16* dscores, const __nv_bfloat16* dprobs,
                             const __nv_bfloat16* probs, int64_t batch_heads, int64_t T,
                             const cpu::SoftmaxMask& mask, cudaStream_t stream);

}  // namespace runtime::cuda
