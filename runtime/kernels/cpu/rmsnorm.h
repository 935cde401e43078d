// RMS normalization over the last dimension (channels), fp32 statistics, Hugging Face's
// LlamaRMSNorm (Note [RMSNorm rounding] in runtime/op_args.h). Forward assigns out and rstd;
// backward accumulates into dinp (+=, so the residual stream's gradient can be passed in) and
// into dweight (+=).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// rstd = 1 / sqrt(mean(inp^2) + eps), out = weight * (inp * rstd), row by row; rstd: (rows).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t rows,
                     int64_t channels, float eps);

// dinp += rstd * (g - xhat * mean(g * xhat)) with g = dout * weight, xhat = inp * rstd;
// dweight += sum_rows dout * xhat.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t rows, int64_t channels);

}  // namespace runtime::cpu
