// Tests of the causal softmax: double reference on and below the diagonal, exact zeros
// above it (whatever the input holds there), in-place use, finite differences, large
// scores, and bit-identical results across thread counts.
#include <string>

#include "kernel_test_util.h"
#include "runtime/kernels/cpu/softmax.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

std::vector<double> softmax_reference(const std::vector<float>& scores, int64_t BH, int64_t T) {
  std::vector<double> p(scores.size(), 0.0);
  for (int64_t row = 0; row < BH * T; ++row) {
    const int64_t i = row % T;
    double m = scores[row * T];
    for (int64_t j = 0; j <= i; ++j) m = std::max(m, double{scores[row * T + j]});
    double s = 0;
    for (int64_t j = 0; j <= i; ++j) s += std::exp(scores[row * T + j] - m);
    for (int64_t j = 0; j <= i; ++j) p[row * T + j] = std::exp(scores[row * T + j] - m) / s;
  }
  return p;
}

// Causal data: random on and below the diagonal, `above` strictly above it.
std::vector<float> causal_random(int64_t BH, int64_t T, uint32_t seed, float above,
                                 float scale = 3.f) {
  auto v = random_vector(BH * T * T, seed, -scale, scale);
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = row % T + 1; j < T; ++j) v[row * T + j] = above;
  return v;
}

TEST(CausalSoftmax, ForwardMatchesReferenceIgnoringEntriesAboveTheDiagonal) {
  const int64_t BH = 3, T = 37;
  const auto scores = causal_random(BH, T, 1, kNaN);  // NaN above the diagonal must not leak
  auto probs = filled(BH * T * T, kNaN);
  causal_softmax_forward(probs.data(), scores.data(), BH, T, {});
  expect_close(probs, softmax_reference(scores, BH, T), 1e-7, 1e-5, "probs");
  for (int64_t row = 0; row < BH * T; ++row) {
    for (int64_t j = row % T + 1; j < T; ++j) ASSERT_EQ(probs[row * T + j], 0.f) << row << "," << j;
  }
  auto in_place = scores;
  causal_softmax_forward(in_place.data(), in_place.data(), BH, T, {});
  EXPECT_TRUE(bitwise_equal(in_place, probs));
}

TEST(CausalSoftmax, LargeScoresDoNotOverflow) {
  const int64_t BH = 2, T = 9;
  auto scores = causal_random(BH, T, 2, 0.f);
  for (float& s : scores) s = s * 100.f + 1000.f;
  std::vector<float> probs(scores.size());
  causal_softmax_forward(probs.data(), scores.data(), BH, T, {});
  expect_close(probs, softmax_reference(scores, BH, T), 1e-7, 1e-5, "probs");
}

TEST(CausalSoftmax, BackwardMatchesReferenceAndZeroesAboveTheDiagonal) {
  const int64_t BH = 3, T = 21;
  std::vector<float> probs(BH * T * T);
  const auto scores = causal_random(BH, T, 3, 0.f);
  causal_softmax_forward(probs.data(), scores.data(), BH, T, {});
  const auto dprobs = causal_random(BH, T, 4, kNaN, 1.f);  // NaN above: never read
  auto dscores = filled(BH * T * T, kNaN);
  causal_softmax_backward(dscores.data(), dprobs.data(), probs.data(), BH, T, {});
  std::vector<double> want(dscores.size(), 0.0);
  for (int64_t row = 0; row < BH * T; ++row) {
    const int64_t i = row % T;
    double dot = 0;
    for (int64_t j = 0; j <= i; ++j) dot += double{dprobs[row * T + j]} * probs[row * T + j];
    for (int64_t j = 0; j <= i; ++j)
      want[row * T + j] = probs[row * T + j] * (dprobs[row * T + j] - dot);
  }
  expect_close(dscores, want, 1e-7, 1e-5, "dscores");
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = row % T + 1; j < T; ++j) ASSERT_EQ(dscores[row * T + j], 0.f);
  auto in_place = dprobs;
  causal_softmax_backward(in_place.data(), in_place.data(), probs.data(), BH, T, {});
  EXPECT_TRUE(bitwise_equal(in_place, dscores));
}

TEST(CausalSoftmax, BackwardMatchesFiniteDifferences) {
  const int64_t BH = 2, T = 11;
  const auto scores = causal_random(BH, T, 5, 0.f);
  const auto weights = causal_random(BH, T, 6, 0.f, 1.f);
  auto loss = [&](const std::vector<float>& s) {
    std::vector<float> p(s.size());
    causal_softmax_forward(p.data(), s.data(), BH, T, {});
    return weighted_sum(p, weights);
  };
  std::vector<float> probs(scores.size()), dscores(scores.size());
  causal_softmax_forward(probs.data(), scores.data(), BH, T, {});
  causal_softmax_backward(dscores.data(), weights.data(), probs.data(), BH, T, {});
  expect_directional_derivative(loss, scores, causal_random(BH, T, 7, 0.f, 1.f), dscores, 1e-2,
                                2e-3, "d/dscores");
}

TEST(CausalSoftmax, BitIdenticalAcrossThreadCountsAndRuns) {
  const int64_t BH = 8, T = 64;
  const auto scores = causal_random(BH, T, 8, 0.f);
  const auto dprobs = causal_random(BH, T, 9, 0.f);
  auto run = [&] {
    std::vector<float> p(scores.size()), ds(scores.size());
    causal_softmax_forward(p.data(), scores.data(), BH, T, {});
    causal_softmax_backward(ds.data(), dprobs.data(), p.data(), BH, T, {});
    return concat(p, ds);
  };
  expect_thread_count_independent(run);
  EXPECT_TRUE(bitwise_equal(run(), run()));
}

// The softmax with `mask` against the double softmax over the columns first(row) <= j <= i,
// forward and backward, every other entry exactly 0: those left of first hold NaN in the input
// and must never be read.
template <class FirstColumn>
void expect_masked_softmax(int64_t BH, int64_t T, const SoftmaxMask& mask, FirstColumn first_of,
                           const std::string& what) {
  auto scores = causal_random(BH, T, 10, kNaN);
  for (int64_t row = 0; row < BH * T; ++row)
    for (int64_t j = 0; j < first_of(row); ++j) scores[row * T + j] = kNaN;
  auto probs = filled(BH * T * T, kNaN);
  causal_softmax_forward(probs.data(), scores.data(), BH, T, mask);
  std::vector<double> want(scores.size(), 0.0);
  for (int64_t row = 0; row < BH * T; ++row) {
    const int64_t i = row % T, first = first_of(row);
    double m = -1e300, s = 0;
    for (int64_t j = first; j <= i; ++j) m = std::max(m, double{scores[row * T + j]});
    for (int64_t j = first; j <= i; ++j) s += std::exp(scores[row * T + j] - m);
    for (int64_t j = first; j <= i; ++j) want[row * T + j] = std::exp(scores[row * T + j] - m) / s;
    for (int64_t j = 0; j < T; ++j)
      if (j < first || j > i) {
        ASSERT_EQ(probs[row * T + j], 0.f) << what << ": " << row << "," << j;
      }
  }
  expect_close(probs, want, 1e-7, 1e-5, what + " probs");

  const auto dprobs = causal_random(BH, T, 11, 0.f, 1.f);
  auto dscores = filled(BH * T * T, kNaN);
  causal_softmax_backward(dscores.data(), dprobs.data(), probs.data(), BH, T, mask);
  std::vector<double> dwant(dscores.size(), 0.0);
  for (int64_t row = 0; row < BH * T; ++row) {
    const int64_t i = row % T, first = first_of(row);
    double dot = 0;
    for (int64_t j = first; j <= i; ++j) dot += double{dprobs[row * T + j]} * probs[row * T + j];
    for (int64_t j = first; j <= i; ++j)
      dwant[row * T + j] = probs[row * T + j] * (dprobs[row * T + j] - dot);
    for (int64_t j = 0; j < T; ++j)
      if (j < first || j > i) {
        ASSERT_EQ(dscores[row * T + j], 0.f) << what << ": " << row << "," << j;
      }
  }
  expect_close(dscores, dwant, 1e-7, 1e-5, what + " dscores");
}

// Sliding window (Note [Sliding window]): row i sees columns i - W < j <= i. W = 1 makes every
// probability 1; W >= T is the plain causal softmax, bit for bit.
TEST(CausalSoftmax, SlidingWindowSeesTheLatestKeysOnly) {
  const int64_t BH = 2, T = 23;
  for (const int64_t W : {1, 2, 7, 22, 23, 40}) {
    expect_masked_softmax(
        BH, T, {.window = W}, [&](int64_t row) { return std::max<int64_t>(0, row % T - W + 1); },
        "window " + std::to_string(W));
  }
  const auto scores = causal_random(BH, T, 12, 0.f);
  std::vector<float> plain(scores.size()), wide(scores.size());
  causal_softmax_forward(plain.data(), scores.data(), BH, T, {});
  causal_softmax_forward(wide.data(), scores.data(), BH, T, {.window = T});
  EXPECT_TRUE(bitwise_equal(plain, wide));
}

// Documents (Note [Document masking]): row i of sample b sees the columns from its document's
// start, each sample its own starts (heads 0-2 of sample 0, 3-5 of sample 1), alone and under a
// window that ends inside some documents.
TEST(CausalSoftmax, DocumentsSeeTheirOwnKeysOnly) {
  const int64_t B = 2, H = 3, T = 23;
  std::vector<int32_t> starts(static_cast<size_t>(T * B));
  for (int64_t i = 0; i < T; ++i) {
    starts[static_cast<size_t>(i * B)] = static_cast<int32_t>(i < 5    ? 0
                                                              : i < 6  ? 5
                                                              : i < 17 ? 6
                                                                       : 17);
    starts[static_cast<size_t>(i * B + 1)] = static_cast<int32_t>(i);  // one-token documents
  }
  for (const int64_t W : {0, 4}) {
    const SoftmaxMask mask{
        .window = W, .document_starts = starts.data(), .micro_batch = B, .heads_per_sample = H};
    expect_masked_softmax(
        B * H, T, mask,
        [&](int64_t row) {
          const int64_t i = row % T, b = row / T / H;
          const int64_t window_first = W > 0 ? std::max<int64_t>(0, i - W + 1) : 0;
          return std::max<int64_t>(window_first, starts[static_cast<size_t>(i * B + b)]);
        },
        "documents, window " + std::to_string(W));
  }
}

}  // namespace
