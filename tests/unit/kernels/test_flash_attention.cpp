// Tests of the flash attention kernels against the unfused chain of CPU kernels (split, scores,
// causal softmax, attention dropout, context, merge, and its backward): ctx, lse and dqkv, the
// dropped elements one by one, bitwise determinism, argument checks; and a timing comparison.
#include <chrono>
#include <cstdio>
#include <string>

#include "kernel_test_util.h"
#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cpu/softmax.h"

namespace {

using namespace runtime;
using namespace runtime::cpu;
using namespace kernel_test;

const DropoutKey kKey = make_dropout_key(7, 11, 2, DropoutOp::attention_probs);

FlashAttentionDims make_dims(int64_t T, int64_t B, int64_t H, int64_t D, float p) {
  return FlashAttentionDims{.seq_len = T,
                            .micro_batch = B,
                            .heads = H,
                            .head_dim = D,
                            .head_offset = 3,
                            .sample_offset = 5,
                            .scale = 1.f / std::sqrt(float(D)),
                            .dropout_prob = p,
                            .dropout_key = kKey};
}

int64_t qkv_size(const FlashAttentionDims& d) {
  return d.seq_len * d.micro_batch * d.heads * 3 * d.head_dim;
}
int64_t ctx_size(const FlashAttentionDims& d) {
  return d.seq_len * d.micro_batch * d.heads * d.head_dim;
}

// The unfused chain, in the kernels' own float arithmetic, with every buffer allocated once;
// per-head tensors are (B, H, T, *).
struct Unfused {
  FlashAttentionDims dims;
  const int32_t* starts = nullptr;  // document starts (T, B), or null
  int64_t BH;
  std::vector<float> q, k, v, probs, dropped, ctx_heads, ctx;  // forward
  std::vector<uint8_t> mask;                                   // forward
  std::vector<float> dctx_heads, dprobs, dq, dk, dv, dqkv;     // backward

  explicit Unfused(const FlashAttentionDims& d)
      : dims(d),
        BH(d.micro_batch * d.heads),
        q(BH * d.seq_len * d.head_dim),
        k(q.size()),
        v(q.size()),
        probs(BH * d.seq_len * d.seq_len),
        dropped(probs.size()),
        ctx_heads(q.size()),
        ctx(q.size()),
        mask(probs.size()),
        dctx_heads(q.size()),
        dprobs(probs.size()),
        dq(q.size()),
        dk(q.size()),
        dv(q.size()),
        dqkv(3 * q.size()) {}

  Unfused(const std::vector<float>& qkv, const FlashAttentionDims& d,
          const int32_t* document_starts = nullptr)
      : Unfused(d) {
    starts = document_starts;
    forward(qkv);
  }

  SoftmaxMask softmax_mask() const {
    return {.window = dims.window,
            .document_starts = starts,
            .micro_batch = dims.micro_batch,
            .heads_per_sample = dims.heads};
  }

  void forward(const std::vector<float>& qkv) {
    const int64_t T = dims.seq_len, B = dims.micro_batch, H = dims.heads, D = dims.head_dim;
    split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, B, H, D);
    attention_scores_forward(probs.data(), q.data(), k.data(), BH, T, D, dims.scale);
    causal_softmax_forward(probs.data(), probs.data(), BH, T, softmax_mask());
    dropout_attention_forward(dropped.data(), mask.data(), probs.data(), B, H, T, dims.head_offset,
                              dims.sample_offset, dims.dropout_prob, dims.dropout_key);
    attention_context_forward(ctx_heads.data(), dropped.data(), v.data(), BH, T, D);
    merge_heads(ctx.data(), ctx_heads.data(), T, B, H, D);
  }

  const std::vector<float>& backward(const std::vector<float>& dctx) {
    const int64_t T = dims.seq_len, B = dims.micro_batch, H = dims.heads, D = dims.head_dim;
    split_heads(dctx_heads.data(), dctx.data(), T, B, H, D);
    attention_context_backward(dprobs.data(), dv.data(), dctx_heads.data(), dropped.data(),
                               v.data(), BH, T, D);
    dropout_backward(dprobs.data(), dprobs.data(), mask.data(), dprobs.size(), dims.dropout_prob);
    causal_softmax_backward(dprobs.data(), dprobs.data(), probs.data(), BH, T, softmax_mask());
    attention_scores_backward(dq.data(), dk.data(), dprobs.data(), q.data(), k.data(), BH, T, D,
                              dims.scale);
    merge_qkv_heads(dqkv.data(), dq.data(), dk.data(), dv.data(), T, B, H, D);
    return dqkv;
  }
};

struct Flash {
  std::vector<float> ctx, lse, dqkv;
};

Flash run_flash(const std::vector<float>& qkv, const std::vector<float>& dctx,
                const FlashAttentionDims& d, const int32_t* starts = nullptr) {
  Flash f{filled(ctx_size(d), kNaN), filled(d.micro_batch * d.heads * d.seq_len, kNaN),
          filled(qkv_size(d), kNaN)};
  flash_attention_forward(f.ctx.data(), f.lse.data(), qkv.data(), d, starts);
  flash_attention_backward(f.dqkv.data(), dctx.data(), qkv.data(), f.ctx.data(), f.lse.data(), d,
                           starts);
  return f;
}

// max |got - want| / max |want|: the error relative to the tensor's scale (NaN counts as inf).
double relative_to_max(const std::vector<float>& got, const std::vector<float>& want) {
  double error = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(double{got[i]} - double{want[i]});
    error = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(error, e);
    scale = std::max(scale, std::fabs(double{want[i]}));
  }
  return scale > 0 ? error / scale : error;
}

// lse of the reference: log sum_{first <= j <= i} exp(scale q_i . k_j), all in double (first
// = 0, or i - window + 1 with a window, or the document's start if later).
std::vector<float> reference_lse(const Unfused& u) {
  const int64_t T = u.dims.seq_len, D = u.dims.head_dim, W = u.dims.window;
  const int64_t B = u.dims.micro_batch, BH = B * u.dims.heads;
  std::vector<float> lse(BH * T);
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> s;
      int64_t first = W > 0 ? std::max<int64_t>(0, i - W + 1) : 0;
      if (u.starts != nullptr)
        first = std::max<int64_t>(first, u.starts[i * B + bh / u.dims.heads]);
      for (int64_t j = first; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += double{u.q[(bh * T + i) * D + d]} * double{u.k[(bh * T + j) * D + d]};
        s.push_back(u.dims.scale * dot);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double x : s) sum += std::exp(x - m);
      lse[bh * T + i] = static_cast<float>(m + std::log(sum));
    }
  return lse;
}

struct Shape {
  int64_t T, B, H, D;
};

class FlashAttentionShapes : public ::testing::TestWithParam<std::tuple<Shape, float>> {};

// Flash of `d` against the unfused chain: ctx, lse and dqkv within 1e-5 of each tensor's largest
// magnitude (relative_to_max).
void expect_flash_matches_unfused(const FlashAttentionDims& d, const int32_t* starts = nullptr) {
  const auto qkv = random_vector(qkv_size(d), 1, -2.f, 2.f);
  const auto dctx = random_vector(ctx_size(d), 2);
  Unfused ref(qkv, d, starts);
  const Flash flash = run_flash(qkv, dctx, d, starts);
  EXPECT_LE(relative_to_max(flash.ctx, ref.ctx), 1e-5) << "ctx";
  EXPECT_LE(relative_to_max(flash.lse, reference_lse(ref)), 1e-5) << "lse";
  EXPECT_LE(relative_to_max(flash.dqkv, ref.backward(dctx)), 1e-5) << "dqkv";
}

TEST_P(FlashAttentionShapes, MatchesTheUnfusedChain) {
  const auto [shape, p] = GetParam();
  expect_flash_matches_unfused(make_dims(shape.T, shape.B, shape.H, shape.D, p));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FlashAttentionShapes,
    ::testing::Combine(::testing::Values(Shape{1, 2, 3, 17}, Shape{7, 1, 8, 1}, Shape{33, 3, 2, 8},
                                         Shape{64, 1, 4, 64}, Shape{65, 2, 1, 128},
                                         Shape{130, 1, 3, 17}, Shape{130, 2, 2, 1},
                                         Shape{257, 1, 2, 64}, Shape{257, 2, 1, 8},
                                         Shape{33, 1, 5, 128}),
                       ::testing::Values(0.f, 0.1f)),
    [](const auto& instance) {
      const Shape s = std::get<0>(instance.param);
      return "T" + std::to_string(s.T) + "_B" + std::to_string(s.B) + "_H" + std::to_string(s.H) +
             "_D" + std::to_string(s.D) + (std::get<1>(instance.param) > 0 ? "_dropout" : "");
    });

// With T <= D, one-hot values V(j, :) = e_j make ctx(i, j) the dropped probability itself, and
// one-hot output gradients dctx(i, :) = e_i make dv(j, i) the same probability, so both the
// forward's and the backward's Philox draws show element by element: nonzero iff kept by
// dropout_attention_forward (p = 0.5: one coordinate off by one changes half the mask).
// T = 33 and 66 give lanes with different element % 4. In the last case query 91 of local
// head 0 sees elements 2^34 - 84 + j, so its keys j = 84..91 lie past Philox block 2^32 (a
// carry into the counter's high word inside a tile), and sample indices are above 2^32.
// Sliding windows (Note [Sliding window]) against the unfused chain with the same window:
// windows of one key, shorter than a key tile, across tile edges, and longer than the sequence.
class FlashAttentionWindows : public ::testing::TestWithParam<std::tuple<Shape, int64_t, float>> {};

TEST_P(FlashAttentionWindows, MatchTheUnfusedChain) {
  const auto [shape, window, p] = GetParam();
  FlashAttentionDims d = make_dims(shape.T, shape.B, shape.H, shape.D, p);
  d.window = window;
  expect_flash_matches_unfused(d);
}

INSTANTIATE_TEST_SUITE_P(Windows, FlashAttentionWindows,
                         ::testing::Combine(::testing::Values(Shape{130, 2, 2, 17},
                                                              Shape{257, 1, 2, 64}),
                                            ::testing::Values(int64_t{1}, int64_t{5}, int64_t{64},
                                                              int64_t{100}, int64_t{300}),
                                            ::testing::Values(0.f, 0.1f)),
                         [](const auto& instance) {
                           const Shape s = std::get<0>(instance.param);
                           return "T" + std::to_string(s.T) + "_D" + std::to_string(s.D) + "_W" +
                                  std::to_string(std::get<1>(instance.param)) +
                                  (std::get<2>(instance.param) > 0 ? "_dropout" : "");
                         });

// Packed documents (Note [Document masking]) against the unfused chain with the same starts:
// documents shorter than a key tile, longer than one, ending on a tile's last row or one past
// it (a key tile whose last query is the next tile's first), one-token documents (every query a
// lone key), each sample its own, with and without a window.
class FlashAttentionDocuments
    : public ::testing::TestWithParam<std::tuple<std::vector<int64_t>, int64_t, float>> {};

TEST_P(FlashAttentionDocuments, MatchTheUnfusedChain) {
  const auto [lengths, window, p] = GetParam();
  FlashAttentionDims d = make_dims(200, 2, 2, 24, p);
  d.window = window;
  // Sample 0 repeats the lengths; sample 1 takes them from the end.
  std::vector<int32_t> starts(static_cast<size_t>(d.seq_len * d.micro_batch));
  for (int64_t b = 0; b < d.micro_batch; ++b) {
    int64_t start = 0, next = 0, k = 0;
    for (int64_t i = 0; i < d.seq_len; ++i) {
      if (i == next) {
        start = i;
        const size_t n = lengths.size(), at = static_cast<size_t>(k++) % n;
        next = i + lengths[b == 0 ? at : n - 1 - at];
      }
      starts[static_cast<size_t>(i * d.micro_batch + b)] = static_cast<int32_t>(start);
    }
  }
  expect_flash_matches_unfused(d, starts.data());
}

INSTANTIATE_TEST_SUITE_P(Documents, FlashAttentionDocuments,
                         ::testing::Combine(::testing::Values(std::vector<int64_t>{1},
                                                              std::vector<int64_t>{7, 30},
                                                              std::vector<int64_t>{64, 3, 100},
                                                              std::vector<int64_t>{65, 63},
                                                              std::vector<int64_t>{150, 1, 1, 20}),
                                            ::testing::Values(int64_t{0}, int64_t{40}),
                                            ::testing::Values(0.f, 0.1f)),
                         [](const auto& instance) {
                           std::string name = "lengths";
                           for (int64_t n : std::get<0>(instance.param))
                             name += "_" + std::to_string(n);
                           return name + "_W" + std::to_string(std::get<1>(instance.param)) +
                                  (std::get<2>(instance.param) > 0 ? "_dropout" : "");
                         });

// One document (every start 0) masks nothing the causal mask does not: the bits without starts.
TEST(FlashAttention, OneDocumentChangesNoBit) {
  const FlashAttentionDims d = make_dims(150, 2, 2, 24, 0.1f);
  const auto qkv = random_vector(qkv_size(d), 4, -2.f, 2.f);
  const auto dctx = random_vector(ctx_size(d), 5);
  const std::vector<int32_t> zeros(static_cast<size_t>(d.seq_len * d.micro_batch), 0);
  const Flash plain = run_flash(qkv, dctx, d), one = run_flash(qkv, dctx, d, zeros.data());
  EXPECT_TRUE(bitwise_equal(plain.ctx, one.ctx));
  EXPECT_TRUE(bitwise_equal(plain.lse, one.lse));
  EXPECT_TRUE(bitwise_equal(plain.dqkv, one.dqkv));
}

// A window as long as the sequence (or longer) masks nothing the causal mask does not: the
// outputs are bit for bit those without a window.
TEST(FlashAttention, AWindowAsLongAsTheSequenceChangesNoBit) {
  for (float p : {0.f, 0.1f}) {
    FlashAttentionDims d = make_dims(150, 2, 2, 24, p);
    const auto qkv = random_vector(qkv_size(d), 4, -2.f, 2.f);
    const auto dctx = random_vector(ctx_size(d), 5);
    const Flash plain = run_flash(qkv, dctx, d);
    for (int64_t window : {150, 1000}) {
      d.window = window;
      const Flash windowed = run_flash(qkv, dctx, d);
      EXPECT_TRUE(bitwise_equal(plain.ctx, windowed.ctx)) << window;
      EXPECT_TRUE(bitwise_equal(plain.lse, windowed.lse)) << window;
      EXPECT_TRUE(bitwise_equal(plain.dqkv, windowed.dqkv)) << window;
    }
  }
}

TEST(FlashAttention, DropsExactlyTheElementsOfTheUnfusedDropout) {
  struct Case {
    int64_t T, head_offset, sample_offset;
  };
  const int64_t straddling_head = (int64_t{1} << 34) / (100 * 100);
  double kept = 0, visible = 0;
  for (const Case c : {Case{33, 3, 5}, Case{66, 3, 5}, Case{128, 3, 5},
                       Case{100, straddling_head, (int64_t{1} << 32) + 1}}) {
    const int64_t T = c.T;
    FlashAttentionDims d = make_dims(T, 2, 2, 128, 0.5f);
    d.head_offset = c.head_offset;
    d.sample_offset = c.sample_offset;
    const int64_t B = d.micro_batch, H = d.heads, D = d.head_dim;
    auto qkv = random_vector(qkv_size(d), 3, -0.5f, 0.5f);
    auto dctx = filled(ctx_size(d), 0.f);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t bh = 0; bh < B * H; ++bh) {
        float* v = qkv.data() + (t * B * H + bh) * 3 * D + 2 * D;
        std::fill(v, v + D, 0.f);
        v[t] = 1.f;
        dctx[(t * B * H + bh) * D + t] = 1.f;
      }
    const Unfused ref(qkv, d);
    const Flash flash = run_flash(qkv, dctx, d);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const bool want = j <= i && ref.mask[(bh * T + i) * T + j] == 1;
          const float ctx = flash.ctx[(i * B * H + bh) * D + j];
          const float dv = flash.dqkv[(j * B * H + bh) * 3 * D + 2 * D + i];
          ASSERT_EQ(ctx != 0.f, want)
              << "forward, T " << T << " bh " << bh << " i " << i << " j " << j;
          ASSERT_EQ(dv != 0.f, want)
              << "backward, T " << T << " bh " << bh << " i " << i << " j " << j;
          kept += want;
        }
    visible += double(B * H * T * (T + 1) / 2);
  }
  EXPECT_NEAR(kept / visible, 0.5, 0.05);
}

TEST(FlashAttention, BitIdenticalAcrossRunsAndThreadCounts) {
  for (float p : {0.f, 0.1f}) {
    const FlashAttentionDims d = make_dims(200, 2, 3, 24, p);
    const auto qkv = random_vector(qkv_size(d), 4, -2.f, 2.f);
    const auto dctx = random_vector(ctx_size(d), 5);
    auto run = [&] {
      Flash f = run_flash(qkv, dctx, d);
      f.ctx.insert(f.ctx.end(), f.lse.begin(), f.lse.end());
      f.ctx.insert(f.ctx.end(), f.dqkv.begin(), f.dqkv.end());
      return f.ctx;
    };
    std::vector<float> one, two, three;
    with_threads(1, [&] { one = run(); });
    with_threads(2, [&] { two = run(); });
    with_threads(3, [&] { three = run(); });
    EXPECT_TRUE(bitwise_equal(one, two)) << "p " << p;
    EXPECT_TRUE(bitwise_equal(one, three)) << "p " << p;
    EXPECT_TRUE(bitwise_equal(two, run())) << "p " << p;
  }
}

TEST(FlashAttention, LseIsTheLogSumExpOfTheScaledCausalScores) {
  // Large scores: the running max must matter (exp of the scores alone overflows float).
  const FlashAttentionDims d = make_dims(150, 1, 2, 16, 0.f);
  const auto qkv = random_vector(qkv_size(d), 6, -12.f, 12.f);
  auto ctx = filled(ctx_size(d), kNaN), lse = filled(2 * 150, kNaN);
  flash_attention_forward(ctx.data(), lse.data(), qkv.data(), d);
  const auto want = reference_lse(Unfused(qkv, d));
  EXPECT_GT(*std::max_element(want.begin(), want.end()), 88.f) << "scores too small to matter";
  EXPECT_LE(relative_to_max(lse, want), 1e-6);
}

TEST(FlashAttention, RejectsHeadDimsOutsideOneTo128AndBadDropout) {
  std::vector<float> buffer(3 * 129 * 4, 0.f), lse(4);
  for (int64_t D : {0, 129}) {
    const FlashAttentionDims d = make_dims(2, 1, 1, D, 0.f);
    EXPECT_THROW(flash_attention_forward(buffer.data(), lse.data(), buffer.data(), d),
                 std::logic_error);
    EXPECT_THROW(flash_attention_backward(buffer.data(), buffer.data(), buffer.data(),
                                          buffer.data(), lse.data(), d),
                 std::logic_error);
  }
  EXPECT_THROW(
      flash_attention_forward(buffer.data(), lse.data(), buffer.data(), make_dims(2, 1, 1, 8, 1.f)),
      std::logic_error);
  EXPECT_NO_THROW(flash_attention_forward(buffer.data(), lse.data(), buffer.data(),
                                          make_dims(2, 1, 1, 128, 0.f)));
  FlashAttentionDims negative_window = make_dims(2, 1, 1, 8, 0.f);
  negative_window.window = -1;
  EXPECT_THROW(flash_attention_forward(buffer.data(), lse.data(), buffer.data(), negative_window),
               std::logic_error);
}

// Timing, not a test: flash forward + backward against the unfused chain (run with
// --gtest_also_run_disabled_tests --gtest_filter='*Timing*' and OMP_WAIT_POLICY=passive).
TEST(FlashAttentionTiming, DISABLED_FlashVersusUnfusedForwardBackward) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (int64_t T : {1024, 4096}) {
    const FlashAttentionDims d = make_dims(T, 1, 4, 64, 0.1f);
    const auto qkv = random_vector(qkv_size(d), 7), dctx = random_vector(ctx_size(d), 8);
    Flash flash{filled(ctx_size(d), 0.f), filled(T * 4, 0.f), filled(qkv_size(d), 0.f)};
    Unfused unfused(d);
    double flash_best = 1e30, unfused_best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {  // buffers allocated (and touched) before any timing
      auto start = Clock::now();
      flash_attention_forward(flash.ctx.data(), flash.lse.data(), qkv.data(), d);
      flash_attention_backward(flash.dqkv.data(), dctx.data(), qkv.data(), flash.ctx.data(),
                               flash.lse.data(), d);
      flash_best = std::min(flash_best, seconds_since(start));
      start = Clock::now();
      unfused.forward(qkv);
      unfused.backward(dctx);
      unfused_best = std::min(unfused_best, seconds_since(start));
    }
    std::printf(
        "T=%lld B=1 H=4 D=64 p=0.1, forward+backward, best of 5: flash %.1f ms, unfused "
        "%.1f ms\n",
        static_cast<long long>(T), 1e3 * flash_best, 1e3 * unfused_best);
  }
}

}  // namespace
