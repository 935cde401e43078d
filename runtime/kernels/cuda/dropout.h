// CUDA twin of runtime/kernels/cpu/dropout.h: the same Philox masks bit for bit (Note
// [Dropout RNG] in runtime/philox.h), u8 masks (1 = kept), kept elements scaled by
// 1 / (1 - p); f32 or bf16 data (scaled in float). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/philox.h"

namespace runtime::cuda {

// Hidden states x(T, B, C) in [s, b, h] layout, possibly a sequence shard: local row t is
// global position t_offset + t; sample b is global sample sample_offset + b; element index
// = (t_offset + t) * C + c. Writes mask (T*B*C) and out = inp * mask / (1 - p); out may alias inp.
void dropout_hidden_forward(float* out, uint8_t* mask, const float* inp, int64_t T, int64_t B,
                            int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key, cudaStream_t stream);
void dropout_hidden_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* inp, int64_t T,
                            int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key, cudaStream_t stream);

// The same mask as dropout_hidden_forward; out = residual + inp * mask / (1 - p), summed in
// float and rounded once; p > 0; out may alias inp or residual.
void dropout_add_hidden_forward(float* out, uint8_t* mask, const float* residual, const float* inp,
                                int64_t T, int64_t B, int64_t C, int64_t t_offset,
                                int64_t sample_offset, float p, DropoutKey key,
                                cudaStream_t stream);
void dropout_add_hidden_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* residual,
                                const __nv_bfloat16* inp, int64_t T, int64_t B, int64_t C,
                                int64_t t_offset, int64_t sample_offset, float p, DropoutKey key,
                                cudaStream_t stream);

// Attention probabilities (B, H, T, T), possibly a head shard: local head h is global head
// head_offset + h; element index = ((head_offset + h) * T + i) * T + j.
void dropout_attention_forward(float* out, uint8_t* mask, const float* inp, int64_t B, int64_t H,
                               int64_t T, int64_t head_offset, int64_t sample_offset, float p,
                               DropoutKey key, cudaStream_t stream);
void dropout_attention_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* inp,
                               int64_t B, int64_t H, int64_t T, int64_t head_offset,
                               int64_t sample_offset, float p, DropoutKey key, cudaStream_t stream);

// out = inp * mask / (1 - p) from an existing mask; out may alias inp.
void dropout_apply(float* out, const float* inp, const uint8_t* mask, int64_t n, float p,
                   cudaStream_t stream);
void dropout_apply(__nv_bfloat16* out, const __nv_bfloat16* inp, const uint8_t* mask, int64_t n,
                   float p, cudaStream_t stream);

// dinp = dout * mask / (1 - p) (=); dinp may alias dout.
void dropout_backward(float* dinp, const float* dout, const uint8_t* mask, int64_t n, float p,
                      cudaStream_t stream);
void dropout_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const uint8_t* mask,
                      int64_t n, float p, cudaStream_t stream);

}  // namespace runtime::cuda
