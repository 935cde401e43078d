// Tests of the core-attention pieces: head split/merge layouts, the four batched products
// against double references on shapes that exercise full tiles, narrow tiles and scalar
// tails, the causal contracts (zeros above the diagonal), finite differences, threads.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/softmax.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

TEST(AttentionHeads, SplitAndMergeFollowTheHeadMajorQkvLayout) {
  const int64_t T = 3, B = 2, H = 4, D = 5;
  const auto qkv = random_vector(T * B * H * 3 * D, 1);
  std::vector<float> q(B * H * T * D, kNaN), k(q.size(), kNaN), v(q.size(), kNaN);
  split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, B, H, D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t src = ((t * B + b) * H + h) * 3 * D + d,
                        dst = ((b * H + h) * T + t) * D + d;
          ASSERT_EQ(q[dst], qkv[src]);
          ASSERT_EQ(k[dst], qkv[src + D]);
          ASSERT_EQ(v[dst], qkv[src + 2 * D]);
        }
  auto merged = filled(qkv.size(), kNaN);
  merge_qkv_heads(merged.data(), q.data(), k.data(), v.data(), T, B, H, D);
  EXPECT_TRUE(bitwise_equal(merged, qkv));

  const auto ctx = random_vector(T * B * H * D, 2);
  std::vector<float> heads(ctx.size(), kNaN), back(ctx.size(), kNaN);
  split_heads(heads.data(), ctx.data(), T, B, H, D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d)
          ASSERT_EQ(heads[((b * H + h) * T + t) * D + d], ctx[((t * B + b) * H + h) * D + d]);
  merge_heads(back.data(), heads.data(), T, B, H, D);
  EXPECT_TRUE(bitwise_equal(back, ctx));
}

struct Shape {
  int64_t BH, T, D;
};

// Random on and below the diagonal of each (T, T) block, `above` strictly above it.
std::vector<float> causal(int64_t BH, int64_t T, uint32_t seed, float above) {
  auto v = random_vector(BH * T * T, seed);
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = row % T + 1; j < T; ++j) v[row * T + j] = above;
  return v;
}

// C(T, N) per head = sum_k A(i, k) B(k, n) with element accessors, in double.
template <class A, class Bf>
std::vector<double> batched(int64_t BH, int64_t M, int64_t N, int64_t K, A a, Bf b) {
  std::vector<double> c(static_cast<size_t>(BH * M * N));
  for (int64_t h = 0; h < BH; ++h)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a(h, i, k) * b(h, k, n);
        c[(h * M + i) * N + n] = s;
      }
  return c;
}

// Element (h, row, col) of a (BH, rows, cols) tensor, in double.
auto element(const std::vector<float>& x, int64_t rows, int64_t cols) {
  return [&x, rows, cols](int64_t h, int64_t row, int64_t col) {
    return double{x[(h * rows + row) * cols + col]};
  };
}

// The accessor of each head's transposed matrix.
template <class F>
auto transposed(F f) {
  return [f](int64_t h, int64_t row, int64_t col) { return f(h, col, row); };
}

class AttentionProducts : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionProducts, ScoresForwardMatchesReferenceOnAndBelowTheDiagonal) {
  const auto [BH, T, D] = GetParam();
  const float scale = 0.3f;
  const auto q = random_vector(BH * T * D, 3), k = random_vector(BH * T * D, 4);
  auto scores = filled(BH * T * T, kNaN);
  attention_scores_forward(scores.data(), q.data(), k.data(), BH, T, D, scale);
  auto want = batched(BH, T, T, D, element(q, T, D), [&](int64_t h, int64_t d, int64_t j) {
    return scale * double{k[(h * T + j) * D + d]};
  });
  std::vector<float> got;
  std::vector<double> want_lower;
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = 0; j <= row % T; ++j)
      got.push_back(scores[row * T + j]), want_lower.push_back(want[row * T + j]);
  expect_close(got, want_lower, 1e-5, 1e-5, "scores");
}

TEST_P(AttentionProducts, ScoresBackwardMatchesReferenceAndAssigns) {
  const auto [BH, T, D] = GetParam();
  const float scale = 0.3f;
  const auto q = random_vector(BH * T * D, 5), k = random_vector(BH * T * D, 6);
  const auto ds = causal(BH, T, 7, 0.f);
  auto dq = filled(q.size(), kNaN), dk = filled(k.size(), kNaN);
  attention_scores_backward(dq.data(), dk.data(), ds.data(), q.data(), k.data(), BH, T, D, scale);
  auto dsa = [&](int64_t h, int64_t i, int64_t j) {
    return scale * double{ds[(h * T + i) * T + j]};
  };
  expect_close(dq, batched(BH, T, D, T, dsa, element(k, T, D)), 1e-5, 1e-5, "dq");
  expect_close(dk, batched(BH, T, D, T, transposed(dsa), element(q, T, D)), 1e-5, 1e-5, "dk");
}

TEST_P(AttentionProducts, ContextForwardAndBackwardMatchReference) {
  const auto [BH, T, D] = GetParam();
  const auto probs = causal(BH, T, 8, 0.f), v = random_vector(BH * T * D, 9);
  const auto dctx = random_vector(BH * T * D, 10);
  auto ctx = filled(BH * T * D, kNaN);
  attention_context_forward(ctx.data(), probs.data(), v.data(), BH, T, D);
  const auto pa = element(probs, T, T), va = element(v, T, D);
  expect_close(ctx, batched(BH, T, D, T, pa, va), 1e-5, 1e-5, "ctx");

  auto dprobs = filled(BH * T * T, kNaN), dv = filled(v.size(), kNaN);
  attention_context_backward(dprobs.data(), dv.data(), dctx.data(), probs.data(), v.data(), BH, T,
                             D);
  auto want_dprobs = batched(BH, T, T, D, element(dctx, T, D), transposed(va));
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = row % T + 1; j < T; ++j) want_dprobs[row * T + j] = 0.0;  // exactly 0 above
  expect_close(dprobs, want_dprobs, 1e-5, 1e-5, "dprobs");
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = row % T + 1; j < T; ++j) ASSERT_EQ(dprobs[row * T + j], 0.f);
  expect_close(dv, batched(BH, T, D, T, transposed(pa), element(dctx, T, D)), 1e-5, 1e-5, "dv");
}

TEST_P(AttentionProducts, BitIdenticalAcrossThreadCountsAndRuns) {
  const auto [BH, T, D] = GetParam();
  const auto q = random_vector(BH * T * D, 11), k = random_vector(BH * T * D, 12);
  const auto probs = causal(BH, T, 13, 0.f), dctx = random_vector(BH * T * D, 14);
  auto run = [&] {
    std::vector<float> s(BH * T * T, 0.f), dq(q.size()), dk(q.size()), ctx(q.size()), dp(s.size()),
        dv(q.size());
    attention_scores_forward(s.data(), q.data(), k.data(), BH, T, D, 0.125f);
    attention_context_forward(ctx.data(), probs.data(), k.data(), BH, T, D);
    attention_context_backward(dp.data(), dv.data(), dctx.data(), probs.data(), q.data(), BH, T, D);
    attention_scores_backward(dq.data(), dk.data(), probs.data(), q.data(), k.data(), BH, T, D,
                              0.125f);
    for (int64_t row = 0; row < BH * T; ++row)  // keep only the defined part of the scores
      for (int64_t j = row % T + 1; j < T; ++j) s[row * T + j] = 0.f;
    return concat(s, dq, dk, ctx, dp, dv);
  };
  expect_thread_count_independent(run);
  EXPECT_TRUE(bitwise_equal(run(), run()));
}

// 37 x 19: row and column tails everywhere; 64 x 64: whole tiles; 70 x 40: one-vector
// tiles plus scalar tails; 130 x 16: many row blocks with a single narrow tile.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionProducts,
                         ::testing::Values(Shape{3, 37, 19}, Shape{2, 64, 64}, Shape{2, 70, 40},
                                           Shape{1, 130, 16}),
                         [](const auto& instance) {
                           return "BH" + std::to_string(instance.param.BH) + "_T" +
                                  std::to_string(instance.param.T) + "_D" +
                                  std::to_string(instance.param.D);
                         });

// Full causal attention (scores -> softmax -> context) and its backward, checked with
// central differences of loss = <weights, ctx> along random directions of q, k and v.
TEST(Attention, ComposedBackwardMatchesFiniteDifferences) {
  const int64_t BH = 2, T = 13, D = 7;
  const float scale = 1.f / std::sqrt(float(D));
  const auto q = random_vector(BH * T * D, 15), k = random_vector(BH * T * D, 16);
  const auto v = random_vector(BH * T * D, 17), weights = random_vector(BH * T * D, 18);
  auto forward = [&](const std::vector<float>& qq, const std::vector<float>& kk,
                     const std::vector<float>& vv, std::vector<float>& probs) {
    probs.assign(BH * T * T, 0.f);
    std::vector<float> ctx(BH * T * D);
    attention_scores_forward(probs.data(), qq.data(), kk.data(), BH, T, D, scale);
    causal_softmax_forward(probs.data(), probs.data(), BH, T, {});
    attention_context_forward(ctx.data(), probs.data(), vv.data(), BH, T, D);
    return ctx;
  };
  std::vector<float> probs, scratch;
  forward(q, k, v, probs);
  std::vector<float> dprobs(probs.size()), dv(v.size()), dq(q.size()), dk(k.size());
  attention_context_backward(dprobs.data(), dv.data(), weights.data(), probs.data(), v.data(), BH,
                             T, D);
  causal_softmax_backward(dprobs.data(), dprobs.data(), probs.data(), BH, T, {});
  attention_scores_backward(dq.data(), dk.data(), dprobs.data(), q.data(), k.data(), BH, T, D,
                            scale);
  auto loss = [&](const std::vector<float>& qq, const std::vector<float>& kk,
                  const std::vector<float>& vv) {
    return weighted_sum(forward(qq, kk, vv, scratch), weights);
  };
  expect_directional_derivative([&](const std::vector<float>& x) { return loss(x, k, v); }, q,
                                random_vector(q.size(), 19), dq, 1e-2, 2e-3, "d/dq");
  expect_directional_derivative([&](const std::vector<float>& x) { return loss(q, x, v); }, k,
                                random_vector(k.size(), 20), dk, 1e-2, 2e-3, "d/dk");
  expect_directional_derivative([&](const std::vector<float>& x) { return loss(q, k, x); }, v,
                                random_vector(v.size(), 21), dv, 1e-2, 1e-3, "d/dv");
}

}  // namespace
