// Tests of the padded-vocab cross entropy: double reference for loss, lse and dlogits,
// padding that neither changes the loss nor gets gradient, aliasing, finite differences,
// large logits, invalid targets, ignored targets (fused and over vocab shards), and thread
// independence.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/vocab_parallel.h"
#include "runtime/op_types.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

constexpr int64_t kRows = 9, kVocab = 103, kPadded = 128;

std::vector<float> logits_with_padding(uint32_t seed, float pad_value, float spread = 3.f) {
  auto x = random_vector(kRows * kPadded, seed, -spread, spread);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = kVocab; j < kPadded; ++j) x[r * kPadded + j] = pad_value;
  return x;
}

std::vector<double> lse_reference(const std::vector<float>& x) {
  std::vector<double> lse;
  for (int64_t r = 0; r < kRows; ++r) {
    double m = x[r * kPadded];
    for (int64_t j = 0; j < kVocab; ++j) m = std::max(m, double{x[r * kPadded + j]});
    double s = 0;
    for (int64_t j = 0; j < kVocab; ++j) s += std::exp(x[r * kPadded + j] - m);
    lse.push_back(m + std::log(s));
  }
  return lse;
}

// Each row's loss from its reference log-sum-exp: lse - the target's logit.
std::vector<double> loss_reference(const std::vector<float>& x, const std::vector<double>& lse,
                                   const std::vector<int32_t>& targets) {
  std::vector<double> loss;
  for (int64_t r = 0; r < kRows; ++r) loss.push_back(lse[r] - x[r * kPadded + targets[r]]);
  return loss;
}

// The forward over kRows rows of kPadded logits, kVocab of them real.
void forward(std::vector<float>& losses, std::vector<float>& lse, const std::vector<float>& logits,
             const std::vector<int32_t>& targets) {
  cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), kRows, kVocab,
                        kPadded);
}

TEST(CrossEntropy, ForwardMatchesReferenceAndIgnoresPadding) {
  const auto targets = random_ints(kRows, 1, 0, kVocab - 1);
  const auto x = logits_with_padding(2, 0.f);
  auto losses = filled(kRows, kNaN), lse = filled(kRows, kNaN);
  forward(losses, lse, x, targets);
  const auto want_lse = lse_reference(x);
  const auto want_loss = loss_reference(x, want_lse, targets);
  expect_close(lse, want_lse, 1e-6, 1e-6, "lse");
  expect_close(losses, want_loss, 1e-6, 1e-6, "loss");
  // Huge or NaN padding logits change nothing: the padding is never read.
  for (float pad : {1e30f, kNaN}) {
    const auto padded = logits_with_padding(2, pad);
    std::vector<float> l2(kRows), lse2(kRows);
    forward(l2, lse2, padded, targets);
    EXPECT_TRUE(bitwise_equal(l2, losses)) << pad;
    EXPECT_TRUE(bitwise_equal(lse2, lse)) << pad;
  }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  const auto targets = random_ints(kRows, 3, 0, kVocab - 1);
  auto x = logits_with_padding(4, 0.f, 50.f);
  for (float& v : x) v += 1000.f;
  std::vector<float> losses(kRows), lse(kRows);
  forward(losses, lse, x, targets);
  const auto want_lse = lse_reference(x);
  const auto want_loss = loss_reference(x, want_lse, targets);
  expect_close(losses, want_loss, 1e-3, 1e-6, "loss");  // lse ~ 1e3: float ulp is 6e-5
}

TEST(CrossEntropy, BackwardMatchesReferenceZeroesPaddingAndMayAliasLogits) {
  const auto targets = random_ints(kRows, 5, 0, kVocab - 1);
  const auto x = logits_with_padding(6, 1e30f);
  std::vector<float> losses(kRows), lse(kRows);
  forward(losses, lse, x, targets);
  const float scale = 1.f / 7.f;
  auto dx = filled(kRows * kPadded, kNaN);
  cross_entropy_backward(dx.data(), x.data(), lse.data(), targets.data(), kRows, kVocab, kPadded,
                         scale);
  const auto want_lse = lse_reference(x);
  std::vector<double> want(dx.size(), 0.0);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kVocab; ++j)
      want[r * kPadded + j] =
          (std::exp(x[r * kPadded + j] - want_lse[r]) - (j == targets[r])) * scale;
  expect_close(dx, want, 1e-7, 1e-5, "dlogits");
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = kVocab; j < kPadded; ++j) ASSERT_EQ(dx[r * kPadded + j], 0.f) << "padding";
  auto in_place = x;
  cross_entropy_backward(in_place.data(), in_place.data(), lse.data(), targets.data(), kRows,
                         kVocab, kPadded, scale);
  EXPECT_TRUE(bitwise_equal(in_place, dx));
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const auto targets = random_ints(kRows, 7, 0, kVocab - 1);
  const auto x = logits_with_padding(8, 0.f);
  const float scale = 0.5f;
  auto loss = [&](const std::vector<float>& logits) {
    std::vector<float> losses(kRows), lse(kRows);
    forward(losses, lse, logits, targets);
    double total = 0;
    for (float l : losses) total += scale * double{l};
    return total;
  };
  std::vector<float> losses(kRows), lse(kRows), dx(x.size());
  forward(losses, lse, x, targets);
  cross_entropy_backward(dx.data(), x.data(), lse.data(), targets.data(), kRows, kVocab, kPadded,
                         scale);
  const auto direction = logits_with_padding(9, 0.f, 1.f);
  expect_directional_derivative(loss, x, direction, dx, 1e-2, 1e-3, "d/dlogits");
}

TEST(CrossEntropy, RejectsTargetsOutsideTheRealVocab) {
  const auto x = logits_with_padding(10, 0.f);
  std::vector<int32_t> targets(kRows, 0);
  targets[3] = kVocab;  // a padding column is not a token
  std::vector<float> losses(kRows), lse(kRows);
  EXPECT_THROW(forward(losses, lse, x, targets), std::logic_error);
}

// kIgnoredTarget rows: loss 0 and a zero gradient row (padding included); every other row as
// with no row ignored. Any other negative target is still refused.
TEST(CrossEntropy, IgnoredTargetsGiveNoLossAndNoGradient) {
  const auto all = random_ints(kRows, 13, 0, kVocab - 1);
  auto targets = all;
  for (int64_t r : {0, 4, 8}) targets[r] = runtime::kIgnoredTarget;
  const auto x = logits_with_padding(14, 0.f);
  auto losses = filled(kRows, kNaN), lse = filled(kRows, kNaN);
  std::vector<float> all_losses(kRows), all_lse(kRows);
  forward(losses, lse, x, targets);
  forward(all_losses, all_lse, x, all);
  auto dx = filled(kRows * kPadded, kNaN), all_dx = dx;
  cross_entropy_backward(dx.data(), x.data(), lse.data(), targets.data(), kRows, kVocab, kPadded,
                         0.25f);
  cross_entropy_backward(all_dx.data(), x.data(), all_lse.data(), all.data(), kRows, kVocab,
                         kPadded, 0.25f);
  for (int64_t r = 0; r < kRows; ++r) {
    const bool ignored = targets[r] == runtime::kIgnoredTarget;
    EXPECT_EQ(losses[r], ignored ? 0.f : all_losses[r]) << "row " << r;
    for (int64_t j = 0; j < kPadded; ++j) {
      const float want = ignored ? 0.f : all_dx[r * kPadded + j];
      ASSERT_EQ(dx[r * kPadded + j], want) << "row " << r << " column " << j;
    }
  }
  targets[2] = -2;
  EXPECT_THROW(forward(losses, lse, x, targets), std::logic_error);
}

// The vocab-shard pieces over two shards of the kVocab real columns (every shard's statistics
// combined as the tensor-parallel head does) give the fused kernel's losses and gradients,
// ignored rows included (0 and zero rows in both shards).
TEST(CrossEntropy, VocabShardsIgnoreTheSameRows) {
  auto targets = random_ints(kRows, 15, 0, kVocab - 1);
  for (int64_t r : {1, 6}) targets[r] = runtime::kIgnoredTarget;
  const auto x = logits_with_padding(16, 0.f);
  std::vector<float> fused_losses(kRows), fused_lse(kRows), fused_dx(x.size());
  forward(fused_losses, fused_lse, x, targets);
  cross_entropy_backward(fused_dx.data(), x.data(), fused_lse.data(), targets.data(), kRows, kVocab,
                         kPadded, 0.5f);
  const int64_t shard_cols = kPadded / 2;
  std::vector<std::vector<float>> shards(2, std::vector<float>(kRows * shard_cols));
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < shard_cols; ++c)
        shards[s][r * shard_cols + c] = x[r * kPadded + s * shard_cols + c];
  const int64_t real[2] = {shard_cols, kVocab - shard_cols};
  std::vector<float> row_max(kRows, -1e30f), sum(kRows, 0.f), target_logit(kRows, 0.f);
  for (int64_t s = 0; s < 2; ++s) {
    std::vector<float> part(kRows);
    vocab_shard_max(part.data(), shards[s].data(), kRows, real[s], shard_cols);
    for (int64_t r = 0; r < kRows; ++r) row_max[r] = std::max(row_max[r], part[r]);
  }
  for (int64_t s = 0; s < 2; ++s) {
    std::vector<float> part(kRows);
    vocab_shard_sum_exp(part.data(), shards[s].data(), row_max.data(), kRows, real[s], shard_cols);
    for (int64_t r = 0; r < kRows; ++r) sum[r] += part[r];
    vocab_shard_target_logit(part.data(), shards[s].data(), targets.data(), kRows, s * shard_cols,
                             real[s], shard_cols);
    for (int64_t r = 0; r < kRows; ++r) target_logit[r] += part[r];
  }
  vocab_shard_finish(target_logit.data(), sum.data(), row_max.data(), targets.data(), kRows);
  expect_close(target_logit, std::vector<double>(fused_losses.begin(), fused_losses.end()), 1e-5,
               1e-5, "losses");
  for (int64_t r : {1, 6}) EXPECT_EQ(target_logit[r], 0.f) << "row " << r;
  for (int64_t s = 0; s < 2; ++s) {
    auto dx = filled(kRows * shard_cols, kNaN);
    vocab_shard_cross_entropy_backward(dx.data(), shards[s].data(), sum.data(), targets.data(),
                                       kRows, s * shard_cols, real[s], shard_cols, 0.5f);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < shard_cols; ++c) {
        const float got = dx[r * shard_cols + c], want = fused_dx[r * kPadded + s * shard_cols + c];
        if (targets[r] == runtime::kIgnoredTarget) {
          ASSERT_EQ(got, 0.f) << "shard " << s << " row " << r << " column " << c;
        }
        ASSERT_NEAR(got, want, 1e-6) << "shard " << s << " row " << r << " column " << c;
      }
    }
  }
}

TEST(CrossEntropy, BitIdenticalAcrossThreadCounts) {
  const int64_t rows = 64, vocab = 1000, padded = 1024;
  const auto x = random_vector(rows * padded, 11, -5.f, 5.f);
  const auto targets = random_ints(rows, 12, 0, vocab - 1);
  auto run = [&] {
    std::vector<float> losses(rows), lse(rows), dx(x.size());
    cross_entropy_forward(losses.data(), lse.data(), x.data(), targets.data(), rows, vocab, padded);
    cross_entropy_backward(dx.data(), x.data(), lse.data(), targets.data(), rows, vocab, padded,
                           0.1f);
    return concat(dx, losses);
  };
  expect_thread_count_independent(run);
}

}  // namespace
