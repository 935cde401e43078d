// Causal softmax over attention scores (batch_heads, T, T), row by row; entries a query does not
// see (above the diagonal, left of a sliding window, before its document) are written as exactly
// 0 and never read from the scores. Both directions assign (=); each row is reduced by one thread
// in a fixed order.
#include "runtime/kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

// The first column the query of `row` (head bh = row / T, position i = row % T) sees: 0 without a
// window or documents, else the later of i - window + 1 and its document's start (Note [Document
// masking] in runtime/op_args.h).
int64_t first_visible(const SoftmaxMask& mask, int64_t row, int64_t T) {
  const int64_t i = row % T;
  int64_t first = mask.window > 0 ? std::max<int64_t>(0, i - mask.window + 1) : 0;
  if (mask.document_starts != nullptr) {
    const int64_t b = row / T / mask.heads_per_sample;
    first = std::max<int64_t>(first, mask.document_starts[i * mask.micro_batch + b]);
  }
  return first;
}

}  // namespace

void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T,
                            const SoftmaxMask& mask) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_heads * T; ++row) {
    const int64_t i = row % T;  // query position: columns first..i are visible
    const int64_t first = first_visible(mask, row, T), seen = i + 1 - first;
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
                             int64_t batch_heads, int64_t T, const SoftmaxMask& mask) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch_heads * T; ++row) {
    const int64_t i = row % T;
    const int64_t first = first_visible(mask, row, T), seen = i + 1 - first;
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
