// RMS normalization over channels. Forward assigns out and rstd; backward adds into dinp and
// dweight (+=). Row statistics are reduced in double, and dweight column by column over rows in
// order: deterministic for any thread count.
#include "runtime/kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

constexpr int64_t kParamColumnBlock = 64;  // columns per thread task in dweight

// y = weight * (x * rstd) over one row of n values; returns rstd.
float normalize_row(float* y, const float* x, const float* weight, int64_t n, float eps) {
  const double mean_square =
      detail::ordered_sum(n, [x](int64_t c) { return double{x[c]} * double{x[c]}; }) /
      static_cast<double>(n);
  const float s = static_cast<float>(1.0 / std::sqrt(mean_square + static_cast<double>(eps)));
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) y[c] = weight[c] * (x[c] * s);
  return s;
}

// The input gradient of one row, rstd s * (g - xhat * mean(g * xhat)) with g = dy * weight and
// xhat = x * s, added to dx (`accumulate`) or written over it (dx may be dy).
void row_input_grad(float* dx, const float* dy, const float* x, const float* weight, float s,
                    int64_t n, bool accumulate) {
  const double g_xhat_mean =
      detail::ordered_sum(n,
                          [=](int64_t c) { return double{dy[c] * weight[c]} * double{x[c] * s}; }) /
      static_cast<double>(n);
  const float b = static_cast<float>(g_xhat_mean);
  if (accumulate) {
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) dx[c] += (dy[c] * weight[c] - (x[c] * s) * b) * s;
  } else {
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) dx[c] = (dy[c] * weight[c] - (x[c] * s) * b) * s;
  }
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t rows,
                     int64_t channels, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    rstd[r] = normalize_row(out + r * channels, inp + r * channels, weight, channels, eps);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t rows, int64_t channels) {
  const int64_t blocks = (channels + kParamColumnBlock - 1) / kParamColumnBlock;
  // One team for both loops: they write different outputs, so the first needs no barrier.
#pragma omp parallel
  {
    // d xhat_i / d x_j = s (delta_ij - xhat_i xhat_j / C), so dinp += s (g - xhat mean(g xhat)).
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < rows; ++r) {
      row_input_grad(dinp + r * channels, dout + r * channels, inp + r * channels, weight, rstd[r],
                     channels, /*accumulate=*/true);
    }
    // dweight += sum_rows dout * xhat: by column blocks, rows in order.
#pragma omp for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t c0 = block * kParamColumnBlock;
      const int64_t width = std::min(kParamColumnBlock, channels - c0);
      double dw[kParamColumnBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = inp + r * channels + c0;
        const float* dy = dout + r * channels + c0;
        const float s = rstd[r];
        for (int64_t c = 0; c < width; ++c) dw[c] += double{dy[c] * (x[c] * s)};
      }
      for (int64_t c = 0; c < width; ++c) dweight[c0 + c] += static_cast<float>(dw[c]);
    }
  }
}

void qk_norm_forward(float* qkv, float* input, float* rstd, const float* q_weight,
                     const float* k_weight, QkHeads heads, float eps) {
  const int64_t D = heads.head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < heads.count(); ++i) {
    float* y = qkv + heads.qkv_offset(i);
    float* x = input + i * D;
    std::copy(y, y + D, x);
    rstd[i] = normalize_row(y, x, heads.key(i) ? k_weight : q_weight, D, eps);
  }
}

void qk_norm_backward(float* dqkv, float* dq_weight, float* dk_weight, const float* input,
                      const float* rstd, const float* q_weight, const float* k_weight,
                      QkHeads heads) {
  const int64_t D = heads.head_dim, n = heads.count();
  const int64_t blocks = (D + kParamColumnBlock - 1) / kParamColumnBlock;
#pragma omp parallel
  {
    // The weights' gradients first (they read dout, which the input gradient replaces): by
    // column blocks of each weight, heads in order.
#pragma omp for schedule(static)
    for (int64_t task = 0; task < 2 * blocks; ++task) {
      const bool key = task >= blocks;
      const int64_t c0 = (task % blocks) * kParamColumnBlock;
      const int64_t width = std::min(kParamColumnBlock, D - c0);
      double dw[kParamColumnBlock] = {};
      for (int64_t i = 0; i < n; ++i) {
        if (heads.key(i) != key) continue;
        const float* x = input + i * D + c0;
        const float* dy = dqkv + heads.qkv_offset(i) + c0;
        const float s = rstd[i];
        for (int64_t c = 0; c < width; ++c) dw[c] += double{dy[c] * (x[c] * s)};
      }
      float* dweight = key ? dk_weight : dq_weight;
      for (int64_t c = 0; c < width; ++c) dweight[c0 + c] += static_cast<float>(dw[c]);
    }
    // (the loop's barrier: every weight gradient has read dout)
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float* dy = dqkv + heads.qkv_offset(i);
      row_input_grad(dy, dy, input + i * D, heads.key(i) ? k_weight : q_weight, rstd[i], D,
                     /*accumulate=*/false);
    }
  }
}

}  // namespace runtime::cpu
