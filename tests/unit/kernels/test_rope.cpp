// Tests of the rotary embedding (Note [Rotary layout]): its values against a direct double
// evaluation of the formula at positions 0 to past 100000, its frequencies against base^(-2i/D),
// forward then backward as the identity, each rotated pair's norm kept, v untouched, and the
// group_size 1 layout as the per-head (heads, 3, head_dim) layout of split_qkv_heads.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/rope.h"
#include "runtime/rotary.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

int64_t width(const RopeDims& d) {
  return d.kv_heads * (d.group_size + 2) * d.head_dim;
}
int64_t elements(const RopeDims& d) {
  return d.seq * d.micro_batch * width(d);
}

// Where feature f of a row sits in its group: head h of the group (group_size + 1 is v), and
// whether that head is rotated.
struct Feature {
  int64_t head, index;
  bool rotated;
};
Feature feature(const RopeDims& d, int64_t f) {
  const int64_t in_group = f % ((d.group_size + 2) * d.head_dim);
  const int64_t head = in_group / d.head_dim;
  return {head, in_group % d.head_dim, head <= d.group_size};
}

// The formula in double on the f32 angle (Note [Rotary frequencies]: the f32 frequency, the f32
// product with the position), for every element of qkv.
std::vector<double> reference(const std::vector<float>& qkv, const RopeDims& d) {
  std::vector<double> out(qkv.begin(), qkv.end());
  const int64_t half = d.head_dim / 2;
  for (int64_t row = 0; row < d.seq * d.micro_batch; ++row) {
    const int64_t position = d.seq_offset + row / d.micro_batch;
    for (int64_t f = 0; f < width(d); ++f) {
      const Feature at = feature(d, f);
      if (!at.rotated) continue;
      const int64_t i = at.index % half;
      const float inv_freq =
          1.f / static_cast<float>(std::pow(static_cast<double>(d.base),
                                            static_cast<double>(static_cast<float>(2 * i) /
                                                                static_cast<float>(d.head_dim))));
      const double angle = static_cast<double>(static_cast<float>(position) * inv_freq);
      const double c = std::cos(angle), s = std::sin(angle);
      const float* x = qkv.data() + row * width(d) + (f - at.index);
      out[row * width(d) + f] =
          at.index < half ? x[i] * c - x[i + half] * s : x[i + half] * c + x[i] * s;
    }
  }
  return out;
}

RopeDims dims(int64_t group_size, int64_t head_dim, int64_t seq_offset, float base) {
  return RopeDims{.seq = 5,
                  .micro_batch = 3,
                  .kv_heads = 2,
                  .group_size = group_size,
                  .head_dim = head_dim,
                  .seq_offset = seq_offset,
                  .base = base};
}

TEST(Rope, MatchesTheFormulaInDoubleAtNearAndFarPositions) {
  for (const RopeDims& d :
       {dims(1, 8, 0, 10000.f), dims(2, 14, 0, 500000.f), dims(4, 64, 4097, 10000.f),
        dims(2, 128, 100000, 500000.f), dims(1, 32, 99998, 10000.f)}) {
    SCOPED_TRACE(testing::Message() << "group_size " << d.group_size << ", head_dim " << d.head_dim
                                    << ", seq_offset " << d.seq_offset);
    const auto x = random_vector(elements(d), 1, -2.f, 2.f);
    auto qkv = x;
    rope_forward(qkv.data(), d);
    expect_close(qkv, reference(x, d), 1e-6, 1e-6, "rotated qkv");
  }
}

TEST(Rope, PositionZeroIsTheIdentity) {
  RopeDims d = dims(2, 16, 0, 10000.f);
  d.seq = 1;
  const auto x = random_vector(elements(d), 2);
  auto qkv = x;
  rope_forward(qkv.data(), d);
  EXPECT_TRUE(bitwise_equal(qkv, x));
}

// inv_freq_i within one f32 ulp of base^(-e) in exact arithmetic, e = 2i/D rounded to f32 as
// Hugging Face rounds it (exact when D is a power of two), and 1 at i = 0.
TEST(Rope, FrequenciesAreThePowersOfTheBase) {
  for (const float base : {10000.f, 500000.f}) {
    for (const int64_t D : {8, 14, 64, 96, 128}) {
      EXPECT_EQ(runtime::rotary_inv_freq(0, D, base), 1.f);
      for (int64_t i = 0; i < D / 2; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
        const double exact = std::pow(static_cast<double>(base), -static_cast<double>(exponent));
        EXPECT_NEAR(runtime::rotary_inv_freq(i, D, base), exact, 0x1p-23 * exact)
            << "base " << base << ", D " << D << ", i " << i;
      }
    }
  }
}

TEST(Rope, BackwardUndoesForward) {
  for (const RopeDims& d :
       {dims(1, 8, 0, 10000.f), dims(4, 96, 4097, 500000.f), dims(2, 128, 100000, 10000.f)}) {
    const auto x = random_vector(elements(d), 3, -3.f, 3.f);
    auto qkv = x;
    rope_forward(qkv.data(), d);
    rope_backward(qkv.data(), d);
    expect_close(qkv, std::vector<double>(x.begin(), x.end()), 1e-6, 0, "backward(forward(x))");
  }
}

// Each rotated pair (x_i, x_{i+D/2}) keeps its length; v (and only v) keeps every bit.
TEST(Rope, KeepsEveryPairsNormAndLeavesVUntouched) {
  const RopeDims d = dims(4, 64, 100000, 500000.f);
  const auto x = random_vector(elements(d), 4, -2.f, 2.f);
  auto qkv = x;
  rope_forward(qkv.data(), d);
  const int64_t half = d.head_dim / 2;
  int64_t v_changed = 0, rotated_unchanged = 0;
  for (int64_t e = 0; e < elements(d); ++e) {
    const Feature at = feature(d, e % width(d));
    if (!at.rotated) {
      v_changed += qkv[e] != x[e];
      continue;
    }
    rotated_unchanged += qkv[e] == x[e];
    if (at.index >= half) continue;
    const double before = std::hypot(double{x[e]}, double{x[e + half]});
    const double after = std::hypot(double{qkv[e]}, double{qkv[e + half]});
    EXPECT_NEAR(after, before, 1e-6 * std::max(1.0, before)) << "element " << e;
  }
  EXPECT_EQ(v_changed, 0);
  EXPECT_LT(rotated_unchanged, elements(d) / 100);  // the far positions move almost all of them
}

// group_size 1 is the (heads, 3, head_dim) layout: after split_qkv_heads, q and k are each
// head's vectors rotated one by one, v is the input's.
TEST(Rope, GroupSizeOneIsThePerHeadLayout) {
  const int64_t T = 6, B = 2, H = 3, D = 10;
  const RopeDims d{.seq = T,
                   .micro_batch = B,
                   .kv_heads = H,
                   .group_size = 1,
                   .head_dim = D,
                   .seq_offset = 11,
                   .base = 10000.f};
  const auto x = random_vector(T * B * H * 3 * D, 5);
  auto qkv = x;
  rope_forward(qkv.data(), d);
  const int64_t n = B * H * T * D;
  std::vector<float> q0(n), k0(n), v0(n), q(n), k(n), v(n);
  split_qkv_heads(q0.data(), k0.data(), v0.data(), x.data(), T, B, H, D);
  split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, B, H, D);
  // One head vector of (B, H, T, D) rotated alone: a call of seq 1 at its position.
  auto rotate_heads = [&](const std::vector<float>& heads) {
    std::vector<float> out(heads.size());
    for (int64_t bh = 0; bh < B * H; ++bh) {
      for (int64_t t = 0; t < T; ++t) {
        const float* head = heads.data() + (bh * T + t) * D;
        std::vector<float> alone(head, head + D);  // a one-head group: [q | k | v]
        alone.resize(3 * D, 0.f);
        const RopeDims one{.seq = 1,
                           .micro_batch = 1,
                           .kv_heads = 1,
                           .group_size = 1,
                           .head_dim = D,
                           .seq_offset = d.seq_offset + t,
                           .base = d.base};
        rope_forward(alone.data(), one);
        std::copy(alone.begin(), alone.begin() + D, out.begin() + (bh * T + t) * D);
      }
    }
    return out;
  };
  EXPECT_TRUE(bitwise_equal(q, rotate_heads(q0)));
  EXPECT_TRUE(bitwise_equal(k, rotate_heads(k0)));
  EXPECT_TRUE(bitwise_equal(v, v0));
}

}  // namespace
