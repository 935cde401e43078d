// Causal softmax over attention scores (batch_heads, T, T), row by row; entries a query does not
// see (above the diagonal, and left of a sliding window) are written as exactly 0 and never read
// from the scores. Both directions assign (=); each row is reduced by one thread in a fixed order.
#include "runtime/kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

// The first column query i sees: 0 without a window, else i - window + 1.
int64_t first_visible(int64_t i, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
}

}  // namespace

void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T,
                            int64_t window) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_heads * T; ++row) {
    const int64_t i = row % T;  // query position: columns first..i are visible
    const int64_t first = first_visible(i, window), seen = i + 1 - first;
    const float* x = scores + row * T + first;
    float* p = probs + row * T;
    const float max_value = detail::ordered_max(x, seen);
#pragma omp simd
    for (int64_t j = 0; j < seen; ++j) p[first + j] = detail::exp_poly(x[j] - max_value);
    const double sum =
        detail::ordered_sum(seen, [p, first](int64_t j) { return double{p[first + j]}; });
    const float inv_sum = static_cast<float>(1.0 / sum);
#pragma omp simd
    for (int64_t j = first; j <= i; ++j) p[j] *= inv_sum;
    std::fill(p, p + first, 0.f);
    std::fill(p + i + 1, p + T, 0.f);
  }
}

void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T, int64_t window) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_heads * T; ++row) {
    const int64_t i = row % T;
    const int64_t first = first_visible(i, window), seen = i + 1 - first;
    const float* dp = dprobs + row * T;
    const float* p = probs + row * T;
    float* ds = dscores + row * T;
    const float row_dot = static_cast<float>(detail::ordered_sum(
        seen, [dp, p, first](int64_t j) { return double{dp[first + j]} * double{p[first + j]}; }));
#pragma omp simd
    for (int64_t j = first; j <= i; ++j) ds[j] = p[j] * (dp[j] - row_dot);
    std::fill(ds, ds + first, 0.f);
    std::fill(ds + i + 1, ds + T, 0.f);
  }
}

}  // namespace runtime::cpu
