// Dropout with Philox masks addressed by global coordinates (Note [Dropout RNG]
// in runtime/philox.h). Masks are 1 byte per element (1 = kept); kept elements
// are scaled by 1 / (1 - p). With p == 0 the mask is all ones and out = inp.
#pragma once

#include <cstdint>

#include "runtime/philox.h"

namespace runtime::cpu {

// Hidden states x(T, B, C) in [s, b, h] layout, possibly a sequence shard:
// local row t is global position t_offset + t; sample b is global sample
// sample_offset + b; element index = (t_offset + t) * C + c.
// Writes mask (T*B*C) and out = inp * mask / (1 - p); out may alias inp.
void dropout_hidden_forward(float* out, uint8_t* mask, const float* inp, int64_t T, int64_t B,
                            int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key);

// Attention probabilities (B, H, T, T), possibly a head shard: local head h is
// global head head_offset + h; element index = ((head_offset + h) * T + i) * T + j.
void dropout_attention_forward(float* out, uint8_t* mask, const float* inp, int64_t B, int64_t H,
                               int64_t T, int64_t head_offset, int64_t sample_offset, float p,
                               DropoutKey key);

// out = inp * mask / (1 - p) from an existing mask; out may alias inp.
void dropout_apply(float* out, const float* inp, const uint8_t* mask, int64_t n, float p);

// dinp = dout * mask / (1 - p) (=); dinp may alias dout.
void dropout_backward(float* dinp, const float* dout, const uint8_t* mask, int64_t n, float p);

}  // namespace runtime::cpu
