// Layer normalization over the last dimension (channels), fp32 statistics.
// Forward also returns per-row mean and rstd; backward accumulates into dinp (+=)
// so the residual stream's gradient can be passed in, and into dweight/dbias (+=).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// out = (inp - mean) * rstd * weight + bias, row by row; mean, rstd: (rows).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int64_t rows, int64_t channels,
                       float eps);

// dinp += d/dinp, dweight += sum_rows dout * xhat, dbias += sum_rows dout.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int64_t rows, int64_t channels);

}  // namespace runtime::cpu
