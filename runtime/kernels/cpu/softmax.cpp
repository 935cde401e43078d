// Causal softmax over attention scores (batch_heads, T, T), row by row; entries above the
// diagonal are written as exactly 0 and never read from the scores. Both directions assign (=);
// each row is reduced by one thread in a fixed order.
#include "runtime/kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {

void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_heads * T; ++row) {
    const int64_t i = row % T;  // query position: columns 0..i are visible
    const float* x = scores + row * T;
    float* p = probs + row * T;
    const float max_value = detail::ordered_max(x, i + 1);
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) p[j] = detail::exp_poly(x[j] - max_value);
    const double sum = detail::ordered_sum(i + 1, [p](int64_t j) { return double{p[j]}; });
    const float inv_sum = static_cast<float>(1.0 / sum);
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) p[j] *= inv_sum;
    std::fill(p + i + 1, p + T, 0.f);
  }
}

void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_heads * T; ++row) {
    const int64_t i = row % T;
    const float* dp = dprobs + row * T;
    const float* p = probs + row * T;
    float* ds = dscores + row * T;
    const float row_dot = static_cast<float>(
        detail::ordered_sum(i + 1, [dp, p](int64_t j) { return double{dp[j]} * double{p[j]}; }));
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) ds[j] = p[j] * (dp[j] - row_dot);
    std::fill(ds + i + 1, ds + T, 0.f);
  }
}

}  // namespace runtime::cpu
