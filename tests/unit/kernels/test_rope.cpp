// Tests of the rotary embedding (Note [Rotary layout]): its values against a direct double
// evaluation of the formula at positions 0 to past 100000, its frequencies against base^(-2i/D)
// and, scaled as Llama 3.1 does, against Hugging Face's,
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
// product with the position), for every element of qkv; `frequencies`, when given, instead of
// base^(-2i/D).
std::vector<double> reference(const std::vector<float>& qkv, const RopeDims& d,
                              const std::vector<float>* frequencies = nullptr) {
  std::vector<double> out(qkv.begin(), qkv.end());
  const int64_t half = d.head_dim / 2;
  for (int64_t row = 0; row < d.seq * d.micro_batch; ++row) {
    const int64_t position = d.seq_offset + row / d.micro_batch;
    for (int64_t f = 0; f < width(d); ++f) {
      const Feature at = feature(d, f);
      if (!at.rotated) continue;
      const int64_t i = at.index % half;
      const float inv_freq = frequencies != nullptr
                                 ? (*frequencies)[static_cast<size_t>(i)]
                                 : 1.f / static_cast<float>(std::pow(
                                             static_cast<double>(d.base),
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

// Every frequency of a head of `head_dim` under `scaling` is `expected`'s, bit for bit, and
// `changed` of them differ from plain RoPE's.
void expect_frequencies(float base, int64_t head_dim, const runtime::RopeScaling& scaling,
                        const std::vector<float>& expected, int64_t changed) {
  int64_t differ = 0;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float scaled = runtime::rotary_inv_freq(i, head_dim, base, scaling);
    EXPECT_EQ(scaled, expected[static_cast<size_t>(i)])
        << "D " << head_dim << ", i " << i << ": " << scaled;
    differ += scaled != runtime::rotary_inv_freq(i, head_dim, base);
  }
  EXPECT_EQ(differ, changed) << "D " << head_dim;
}

// Llama 3.1's scaling, bit for bit against Hugging Face's _compute_llama3_parameters run in
// PyTorch (f32 tensors) for Llama 3.2's values (factor 32; 3 frequencies blended, 17 changed)
// and a small head whose band the blend covers (2 blended, 7 changed). Note [Rope scaling
// rounding].
TEST(Rope, ScaledFrequenciesAreHuggingFacesBits) {
  struct Case {
    float base;
    int64_t head_dim;
    runtime::RopeScaling scaling;
    std::vector<float> expected;
  };
  const Case cases[] = {
      {500000.f,
       64,
       {.factor = 32.f},  // low_freq_factor 1, high_freq_factor 4, original 8192
       {0x1p+0f,         0x1.53c38cp-1f,  0x1.c2ef78p-2f,  0x1.2b3dc6p-2f,  0x1.8d276p-3f,
        0x1.078d4p-3f,   0x1.5dc95ap-4f,  0x1.d03ccep-5f,  0x1.34119p-5f,   0x1.98de92p-6f,
        0x1.0f5386p-6f,  0x1.681adap-7f,  0x1.ddee9ep-8f,  0x1.3d2804p-8f,  0x1.a4ee4p-9f,
        0x1.524f36p-10f, 0x1.c26c4p-12f,  0x1.9731eep-14f, 0x1.46831ap-16f, 0x1.b15902p-17f,
        0x1.1f91fp-17f,  0x1.7da9e8p-18f, 0x1.fa8b86p-19f, 0x1.5024d6p-19f, 0x1.be2188p-20f,
        0x1.280d96p-20f, 0x1.88ec2p-21f,  0x1.04be68p-21f, 0x1.5a0f4ep-22f, 0x1.cb4a9ap-23f,
        0x1.30c94ep-23f, 0x1.94836p-24f}},
      {10000.f,
       16,
       {.factor = 8.f, .original_max_position_embeddings = 64},
       {0x1p+0f, 0x1.f47fe8p-3f, 0x1.ab5e6p-7f, 0x1.030dc6p-8f, 0x1.47ae14p-10f, 0x1.9e7c7p-12f,
        0x1.0624dep-13f, 0x1.4b96cp-15f}},
  };
  for (const Case& c : cases)
    expect_frequencies(c.base, c.head_dim, c.scaling, c.expected, c.head_dim == 64 ? 17 : 7);
}

// YaRN, bit for bit against Hugging Face's _compute_yarn_parameters run in PyTorch (f32 tensors)
// for Qwen's long-context setting on heads of 128 (factor 4 over 32768 positions: pairs 0-23
// kept, 24-39 blended, 40-63 divided by 4) and a small head (factor 4 over 4096: pairs 0-2 kept,
// 3-5 blended, 6-7 divided); the scores' factor is the attention factor 0.1 ln 4 + 1 squared.
// One value is not PyTorch's: its f32 pow rounds 1e6^(74/128) one ulp low (0x1.6fd744p+11
// against the correctly rounded 0x1.6fd746p+11), so pair 37 expects the frequency of the
// correctly rounded power (Note [Rotary frequencies]; plain RoPE's pair 37 differs the same way).
TEST(Rope, YarnFrequenciesAreHuggingFacesBits) {
  const runtime::RopeScaling qwen{.type = runtime::RopeScalingType::yarn,
                                  .factor = 4.f,
                                  .original_max_position_embeddings = 32768};
  const std::vector<float> qwen_expected = {
      0x1p+0f,         0x1.9c975ap-1f,  0x1.4c7bcp-1f,   0x1.0beddep-1f,  0x1.afd136p-2f,
      0x1.5bf9fep-2f,  0x1.186a08p-2f,  0x1.c3f06ap-3f,  0x1.6c310ep-3f,  0x1.257b22p-3f,
      0x1.d8ffacp-4f,  0x1.7d298cp-4f,  0x1.33281ap-4f,  0x1.ef0a26p-5f,  0x1.8eec7ep-5f,
      0x1.41783ap-5f,  0x1.030dc6p-5f,  0x1.a1835p-6f,   0x1.507316p-6f,  0x1.0f201p-6f,
      0x1.b4f7e4p-7f,  0x1.6020a4p-7f,  0x1.1bc25ap-7f,  0x1.c9548cp-8f,  0x1.6046eep-8f,
      0x1.0ec71p-8f,   0x1.9f4aap-9f,   0x1.3da49p-9f,   0x1.e483bep-10f, 0x1.70578p-10f,
      0x1.17040ep-10f, 0x1.a4fb7p-11f,  0x1.3c1d64p-11f, 0x1.d832dp-12f,  0x1.5e7a04p-12f,
      0x1.02387cp-12f, 0x1.79277cp-13f, 0x1.107c6ep-13f, 0x1.847d34p-14f, 0x1.103a14p-14f,
      0x1.74eea6p-15f, 0x1.2c8648p-15f, 0x1.e459c4p-16f, 0x1.864f6ap-16f, 0x1.3a8748p-16f,
      0x1.faeba8p-17f, 0x1.987f7cp-17f, 0x1.492f56p-17f, 0x1.094564p-17f, 0x1.ab8882p-18f,
      0x1.58863ap-18f, 0x1.15a1dap-18f, 0x1.bf749ep-19f, 0x1.68941cp-19f, 0x1.2291c6p-19f,
      0x1.d44e64p-20f, 0x1.796182p-20f, 0x1.301c04p-20f, 0x1.ea20ep-21f,  0x1.8af756p-21f,
      0x1.3e47c8p-21f, 0x1.007bd8p-21f, 0x1.9d5ef2p-22f, 0x1.4d1c98p-22f};
  const runtime::RopeScaling small{.type = runtime::RopeScalingType::yarn,
                                   .factor = 4.f,
                                   .original_max_position_embeddings = 4096};
  const std::vector<float> small_expected = {0x1p+0f,         0x1.43d136p-2f, 0x1.99999ap-4f,
                                             0x1.a4f66p-6f,   0x1.999998p-8f, 0x1.6aace2p-10f,
                                             0x1.0624dep-12f, 0x1.4b96cp-14f};
  expect_frequencies(1000000.f, 128, qwen, qwen_expected, 40);
  expect_frequencies(10000.f, 16, small, small_expected, 5);
  const float attention = 1.13862943649292f;  // f32(0.1 ln 4 + 1), as PyTorch holds it
  EXPECT_EQ(qwen.score_factor(), attention * attention);
  EXPECT_EQ(runtime::RopeScaling{.factor = 8.f}.score_factor(), 1.f);  // Llama 3.1's: none
}

// The kernel rotates by the scaled frequencies: the formula on Hugging Face's scaled frequencies
// (the second case above) at positions 4093-4097, and not plain RoPE's rotation.
TEST(Rope, ScalingReachesTheKernel) {
  RopeDims d = dims(2, 16, 4093, 10000.f);
  d.scaling = {.factor = 8.f, .original_max_position_embeddings = 64};
  const std::vector<float> frequencies = {0x1p+0f,         0x1.f47fe8p-3f,  0x1.ab5e6p-7f,
                                          0x1.030dc6p-8f,  0x1.47ae14p-10f, 0x1.9e7c7p-12f,
                                          0x1.0624dep-13f, 0x1.4b96cp-15f};
  const auto x = random_vector(elements(d), 5, -2.f, 2.f);
  auto scaled = x;
  rope_forward(scaled.data(), d);
  expect_close(scaled, reference(x, d, &frequencies), 1e-6, 1e-6, "scaled rotation");
  RopeDims plain = d;
  plain.scaling.factor = 0.f;
  auto unscaled = x;
  rope_forward(unscaled.data(), plain);
  EXPECT_FALSE(bitwise_equal(scaled, unscaled));
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

// With document starts (Note [Document positions]) each row of each sample is rotated as a
// lone row at its document's position would be: exactly, forward and backward.
TEST(Rope, DocumentStartsRotateEachRowAtItsPositionInItsDocument) {
  RopeDims d = dims(2, 14, 4097, 500000.f);
  d.seq = 6;
  std::vector<int32_t> starts(static_cast<size_t>(d.seq * d.micro_batch));
  for (int64_t t = 0; t < d.seq; ++t)
    for (int64_t b = 0; b < d.micro_batch; ++b)  // sample b's second document starts at row b + 1
      starts[t * d.micro_batch + b] = static_cast<int32_t>(t > b ? d.seq_offset + b + 1 : 17);
  d.document_starts = starts.data();
  const auto x = random_vector(elements(d), 5);
  for (const bool backward : {false, true}) {
    auto qkv = x;
    backward ? rope_backward(qkv.data(), d) : rope_forward(qkv.data(), d);
    for (int64_t row = 0; row < d.seq * d.micro_batch; ++row) {
      RopeDims one = d;
      one.seq = one.micro_batch = 1;
      one.seq_offset = d.seq_offset + row / d.micro_batch - starts[row];
      one.document_starts = nullptr;
      std::vector<float> alone(x.begin() + row * width(d), x.begin() + (row + 1) * width(d));
      backward ? rope_backward(alone.data(), one) : rope_forward(alone.data(), one);
      const std::vector<float> got(qkv.begin() + row * width(d),
                                   qkv.begin() + (row + 1) * width(d));
      ASSERT_TRUE(bitwise_equal(got, alone)) << "row " << row << (backward ? " (backward)" : "");
    }
  }
}

}  // namespace
