// Layer normalization over channels. Forward assigns out, mean, rstd; backward adds
// into dinp, dweight and dbias (+=). Row statistics are reduced in double, and the
// parameter gradients column by column over rows in order: deterministic for any thread count.
#include "runtime/kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

constexpr int64_t kParamColumnBlock = 64;  // columns per thread task in dweight/dbias

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t rows, int64_t channels, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = inp + r * channels;
    const double row_mean = detail::ordered_sum(channels, [x](int64_t c) { return double{x[c]}; }) /
                            static_cast<double>(channels);
    const double variance = detail::ordered_sum(channels,
                                                [x, row_mean](int64_t c) {
                                                  const double d = x[c] - row_mean;
                                                  return d * d;
                                                }) /
                            static_cast<double>(channels);
    const float m = static_cast<float>(row_mean);
    const float s = static_cast<float>(1.0 / std::sqrt(variance + static_cast<double>(eps)));
    float* y = out + r * channels;
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t rows, int64_t channels) {
  // dinp += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dout * weight.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = inp + r * channels;
    const float* dy = dout + r * channels;
    const float m = mean[r], s = rstd[r];
    const double dnorm_mean =
        detail::ordered_sum(channels,
                            [dy, weight](int64_t c) { return double{dy[c] * weight[c]}; }) /
        static_cast<double>(channels);
    const double dnorm_xhat_mean =
        detail::ordered_sum(
            channels,
            [=](int64_t c) { return double{dy[c] * weight[c]} * double{(x[c] - m) * s}; }) /
        static_cast<double>(channels);
    const float a = static_cast<float>(dnorm_mean), b = static_cast<float>(dnorm_xhat_mean);
    float* dx = dinp + r * channels;
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) {
      const float xhat = (x[c] - m) * s;
      dx[c] += (dy[c] * weight[c] - a - xhat * b) * s;
    }
  }
  // dweight += sum_rows dout * xhat, dbias += sum_rows dout: by column blocks, rows in order.
  const int64_t blocks = (channels + kParamColumnBlock - 1) / kParamColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kParamColumnBlock;
    const int64_t width = std::min(kParamColumnBlock, channels - c0);
    double dw[kParamColumnBlock] = {}, db[kParamColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = inp + r * channels + c0;
      const float* dy = dout + r * channels + c0;
      const float m = mean[r], s = rstd[r];
      for (int64_t c = 0; c < width; ++c) {
        dw[c] += double{dy[c] * ((x[c] - m) * s)};
        db[c] += double{dy[c]};
      }
    }
    for (int64_t c = 0; c < width; ++c) {
      dweight[c0 + c] += static_cast<float>(dw[c]);
      dbias[c0 + c] += static_cast<float>(db[c]);
    }
  }
}

}  // namespace runtime::cpu
