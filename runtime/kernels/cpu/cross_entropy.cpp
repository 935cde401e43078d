// Softmax cross entropy over the first `vocab` of `padded_vocab` logit columns; padding
// columns are never read and get zero gradient, as does a row whose target is kIgnoredTarget
// (loss 0). Forward assigns losses and lse; backward
// assigns dlogits (=). One thread per row, reductions in a fixed order (deterministic).
#include "runtime/kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/kernels/cpu/vector_math.h"
#include "runtime/op_types.h"

namespace runtime::cpu {
namespace {

void check_targets(const int32_t* targets, int64_t rows, int64_t vocab, int64_t padded_vocab) {
  TRAINER_ASSERT(vocab > 0 && vocab <= padded_vocab,
                 "cross entropy vocab " << vocab << ", padded_vocab " << padded_vocab);
  for (int64_t r = 0; r < rows; ++r) {
    TRAINER_ASSERT(targets[r] == kIgnoredTarget || (targets[r] >= 0 && targets[r] < vocab),
                   "target " << targets[r] << " of row " << r << " outside vocab " << vocab);
  }
}

}  // namespace

void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t vocab, int64_t padded_vocab) {
  check_targets(targets, rows, vocab, padded_vocab);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * padded_vocab;
    const float max_value = detail::ordered_max(x, vocab);
    const double sum_exp = detail::ordered_sum(
        vocab, [x, max_value](int64_t j) { return double{detail::exp_poly(x[j] - max_value)}; });
    const double row_lse = double{max_value} + std::log(sum_exp);
    lse[r] = static_cast<float>(row_lse);
    losses[r] =
        targets[r] == kIgnoredTarget ? 0.f : static_cast<float>(row_lse - double{x[targets[r]]});
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale) {
  check_targets(targets, rows, vocab, padded_vocab);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * padded_vocab;
    float* dx = dlogits + r * padded_vocab;  // may be x itself: each element is read, then written
    const float row_lse = lse[r];
    const int32_t target = targets[r];
    if (target == kIgnoredTarget) {
      std::fill(dx, dx + padded_vocab, 0.f);
      continue;
    }
    const float target_logit = x[target];
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) dx[j] = detail::exp_poly(x[j] - row_lse) * scale;
    dx[target] = (detail::exp_poly(target_logit - row_lse) - 1.f) * scale;
    std::fill(dx + vocab, dx + padded_vocab, 0.f);
  }
}

}  // namespace runtime::cpu
