// Tests of Philox4x32-10 (Random123 known-answer vectors) and the dropout kernels: masks
// follow Note [Dropout RNG] element by element, kept fraction, p = 0, invariance under
// sequence/head/sample sharding, apply/backward reproducing forward, thread independence.
#include "runtime/kernels/cpu/dropout.h"

#include "kernel_test_util.h"

namespace {

using namespace runtime;
using namespace runtime::cpu;
using namespace kernel_test;

struct KnownAnswer {
  Philox4x32 counter;
  uint32_t key0, key1;
  Philox4x32 expected;
};

// Random123's tests/kat_vectors, the three "philox4x32 10" lines (counter, key, output).
TEST(Philox, MatchesRandom123KnownAnswerVectors) {
  const KnownAnswer vectors[] = {
      {{{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}},
       0x00000000u,
       0x00000000u,
       {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const KnownAnswer& kat : vectors) {
    const Philox4x32 got = philox4x32_10(kat.counter, kat.key0, kat.key1);
    for (int lane = 0; lane < 4; ++lane) EXPECT_EQ(got.v[lane], kat.expected.v[lane]) << lane;
  }
}

TEST(Philox, DropoutBitsAddressLanesOfOneBlock) {
  const DropoutKey key = make_dropout_key(1234, 5, 3, DropoutOp::mlp_out);
  const uint64_t sample = (uint64_t{7} << 32) | 9, block = (uint64_t{2} << 32) | 11;
  const Philox4x32 bits = philox4x32_10(
      Philox4x32{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                  static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}},
      key.key0, key.key1);
  for (uint64_t lane = 0; lane < 4; ++lane)
    EXPECT_EQ(dropout_bits(key, sample, block * 4 + lane), bits.v[lane]);
  EXPECT_NE(dropout_bits(key, sample, 0), dropout_bits(key, sample + 1, 0));
  const DropoutKey other = make_dropout_key(1234, 6, 3, DropoutOp::mlp_out);
  EXPECT_TRUE(key.key0 != other.key0 || key.key1 != other.key1) << "step must change the key";
}

const DropoutKey kKey = make_dropout_key(42, 3, 1, DropoutOp::attention_out);

// out and mask of the hidden-state kernel for x(T, B, C), written element by element from
// dropout_bits: the specification in the Note, independent of the kernel's blocking.
void hidden_reference(std::vector<float>& out, std::vector<uint8_t>& mask,
                      const std::vector<float>& x, int64_t T, int64_t B, int64_t C,
                      int64_t t_offset, int64_t sample_offset, float p, DropoutKey key) {
  const uint32_t threshold = dropout_threshold(p);
  const float scale = 1.0f / (1.0f - p);
  out.resize(x.size());
  mask.resize(x.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (t * B + b) * C + c;
        const bool keep = dropout_bits(key, sample_offset + b, (t_offset + t) * C + c) >= threshold;
        mask[i] = keep;
        out[i] = keep ? x[i] * scale : 0.f;
      }
}

TEST(Dropout, HiddenForwardFollowsTheNoteElementByElement) {
  // C % 4 != 0: rows start mid-block; C > 128: batched Philox, single blocks and tails.
  const int64_t T = 5, B = 3, C = 165;
  const auto x = random_vector(T * B * C, 1);
  std::vector<float> out(x.size(), kNaN), want_out;
  std::vector<uint8_t> mask(x.size(), 7), want_mask;
  dropout_hidden_forward(out.data(), mask.data(), x.data(), T, B, C, 2, 7, 0.3f, kKey);
  hidden_reference(want_out, want_mask, x, T, B, C, 2, 7, 0.3f, kKey);
  EXPECT_EQ(mask, want_mask);
  EXPECT_TRUE(bitwise_equal(out, want_out));
  auto in_place = x;
  dropout_hidden_forward(in_place.data(), mask.data(), in_place.data(), T, B, C, 2, 7, 0.3f, kKey);
  EXPECT_TRUE(bitwise_equal(in_place, want_out));
}

TEST(Dropout, KeptFractionIsWithinFourSigma) {
  const int64_t T = 256, B = 4, C = 1024;
  const double n = double(T * B * C);
  const auto x = filled(T * B * C, 1.f);
  std::vector<float> out(x.size());
  std::vector<uint8_t> mask(x.size());
  for (float p : {0.1f, 0.5f}) {
    dropout_hidden_forward(out.data(), mask.data(), x.data(), T, B, C, 0, 0, p, kKey);
    double kept = 0;
    for (uint8_t m : mask) kept += m;
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(kept, n * (1 - p), 4 * sigma) << "p = " << p;
    for (size_t i = 0; i < out.size(); i += 997)
      EXPECT_EQ(out[i], mask[i] ? 1.0f / (1.0f - p) : 0.f);
  }
}

TEST(Dropout, ZeroProbabilityIsAnExactCopy) {
  auto x = random_vector(4 * 3 * 10, 2, -1e30f, 1e30f);
  x[0] = -0.f;
  x[1] = 1e-40f;  // subnormal
  std::vector<float> out(x.size(), kNaN);
  std::vector<uint8_t> mask(x.size(), 0);
  dropout_hidden_forward(out.data(), mask.data(), x.data(), 4, 3, 10, 0, 0, 0.f, kKey);
  EXPECT_TRUE(bitwise_equal(out, x));
  EXPECT_EQ(mask, std::vector<uint8_t>(x.size(), 1));
  std::vector<float> probs(2 * 3 * 5 * 5, kNaN);
  std::vector<uint8_t> probs_mask(probs.size(), 0);
  const auto p_in = random_vector(probs.size(), 3);
  dropout_attention_forward(probs.data(), probs_mask.data(), p_in.data(), 2, 3, 5, 0, 0, 0.f, kKey);
  EXPECT_TRUE(bitwise_equal(probs, p_in));
  EXPECT_EQ(probs_mask, std::vector<uint8_t>(probs.size(), 1));
}

TEST(Dropout, HiddenSequenceAndSampleShardsEqualSlicesOfTheFullCall) {
  const int64_t T = 12, B = 4, C = 30;
  const auto x = random_vector(T * B * C, 4);
  std::vector<float> full(x.size());
  std::vector<uint8_t> full_mask(x.size());
  dropout_hidden_forward(full.data(), full_mask.data(), x.data(), T, B, C, 0, 0, 0.25f, kKey);
  // Sequence shard t in [5, 12): contiguous rows of the [s, b, h] layout.
  const int64_t t0 = 5, offset = t0 * B * C;
  std::vector<float> shard(x.size() - offset);
  std::vector<uint8_t> shard_mask(shard.size());
  dropout_hidden_forward(shard.data(), shard_mask.data(), x.data() + offset, T - t0, B, C, t0, 0,
                         0.25f, kKey);
  for (size_t i = 0; i < shard.size(); ++i) {
    ASSERT_EQ(shard_mask[i], full_mask[offset + i]) << i;
    ASSERT_EQ(shard[i], full[offset + i]) << i;
  }
  // Sample shard b in [2, 4) with sample_offset 2 (data parallel rank 1 of 2).
  std::vector<float> xs, sample_out(T * 2 * C);
  for (int64_t t = 0; t < T; ++t)
    xs.insert(xs.end(), x.begin() + (t * B + 2) * C, x.begin() + (t * B + 4) * C);
  std::vector<uint8_t> sample_mask(xs.size());
  dropout_hidden_forward(sample_out.data(), sample_mask.data(), xs.data(), T, 2, C, 0, 2, 0.25f,
                         kKey);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < 2 * C; ++i) {
      ASSERT_EQ(sample_mask[t * 2 * C + i], full_mask[(t * B + 2) * C + i]);
      ASSERT_EQ(sample_out[t * 2 * C + i], full[(t * B + 2) * C + i]);
    }
}

TEST(Dropout, AttentionHeadShardEqualsSliceOfTheFullCall) {
  const int64_t B = 2, H = 6, T = 9, h0 = 2, Hs = 3;
  const auto x = random_vector(B * H * T * T, 5);
  std::vector<float> full(x.size());
  std::vector<uint8_t> full_mask(x.size());
  dropout_attention_forward(full.data(), full_mask.data(), x.data(), B, H, T, 0, 11, 0.2f, kKey);
  std::vector<float> xs;
  for (int64_t b = 0; b < B; ++b)
    xs.insert(xs.end(), x.begin() + (b * H + h0) * T * T, x.begin() + (b * H + h0 + Hs) * T * T);
  std::vector<float> shard(xs.size());
  std::vector<uint8_t> shard_mask(xs.size());
  dropout_attention_forward(shard.data(), shard_mask.data(), xs.data(), B, Hs, T, h0, 11, 0.2f,
                            kKey);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Hs * T * T; ++i) {
      ASSERT_EQ(shard_mask[b * Hs * T * T + i], full_mask[(b * H + h0) * T * T + i]);
      ASSERT_EQ(shard[b * Hs * T * T + i], full[(b * H + h0) * T * T + i]);
    }
  // And the full call follows the Note: element index ((head) * T + i) * T + j, sample 11 + b.
  const uint32_t threshold = dropout_threshold(0.2f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < H * T * T; ++e)
      ASSERT_EQ(full_mask[b * H * T * T + e], dropout_bits(kKey, 11 + b, e) >= threshold ? 1 : 0);
}

TEST(Dropout, DifferentSamplesAndKeysGiveDifferentMasks) {
  const int64_t T = 16, B = 2, C = 128;
  const auto x = random_vector(T * B * C, 6);
  std::vector<float> out(x.size());
  std::vector<uint8_t> a(x.size()), b(x.size()), c(x.size());
  dropout_hidden_forward(out.data(), a.data(), x.data(), T, B, C, 0, 0, 0.5f, kKey);
  dropout_hidden_forward(out.data(), b.data(), x.data(), T, B, C, 0, 1, 0.5f, kKey);
  dropout_hidden_forward(out.data(), c.data(), x.data(), T, B, C, 0, 0, 0.5f,
                         make_dropout_key(42, 4, 1, DropoutOp::attention_out));
  auto differing = [](const std::vector<uint8_t>& u, const std::vector<uint8_t>& v) {
    int64_t d = 0;
    for (size_t i = 0; i < u.size(); ++i) d += u[i] != v[i];
    return d;
  };
  // Independent masks differ in about half of the elements.
  EXPECT_GT(differing(a, b), int64_t(x.size()) / 3);
  EXPECT_GT(differing(a, c), int64_t(x.size()) / 3);
}

TEST(Dropout, ApplyAndBackwardReuseTheForwardMask) {
  const int64_t T = 7, B = 3, C = 19;
  const float p = 0.4f;
  const auto x = random_vector(T * B * C, 7);
  std::vector<float> out(x.size());
  std::vector<uint8_t> mask(x.size());
  dropout_hidden_forward(out.data(), mask.data(), x.data(), T, B, C, 0, 0, p, kKey);
  std::vector<float> applied(x.size(), kNaN);
  dropout_apply(applied.data(), x.data(), mask.data(), x.size(), p);
  EXPECT_TRUE(bitwise_equal(applied, out));
  auto in_place = x;
  dropout_apply(in_place.data(), in_place.data(), mask.data(), x.size(), p);
  EXPECT_TRUE(bitwise_equal(in_place, out));

  const auto dout = random_vector(x.size(), 8);
  std::vector<float> dinp(x.size(), kNaN), want(x.size());
  dropout_backward(dinp.data(), dout.data(), mask.data(), x.size(), p);
  for (size_t i = 0; i < x.size(); ++i) want[i] = mask[i] ? dout[i] * (1.0f / (1.0f - p)) : 0.f;
  EXPECT_TRUE(bitwise_equal(dinp, want));
  auto dinp_in_place = dout;
  dropout_backward(dinp_in_place.data(), dinp_in_place.data(), mask.data(), x.size(), p);
  EXPECT_TRUE(bitwise_equal(dinp_in_place, want));
}

TEST(Dropout, BitIdenticalAcrossThreadCounts) {
  const int64_t B = 2, H = 4, T = 33;
  const auto x = random_vector(B * H * T * T, 9);
  auto run = [&] {
    std::vector<float> out(x.size()), hidden(x.size());
    std::vector<uint8_t> mask(x.size()), hidden_mask(x.size());
    dropout_attention_forward(out.data(), mask.data(), x.data(), B, H, T, 1, 3, 0.1f, kKey);
    dropout_hidden_forward(hidden.data(), hidden_mask.data(), x.data(), T, B, H * T, 4, 3, 0.1f,
                           kKey);
    out.insert(out.end(), hidden.begin(), hidden.end());
    for (size_t i = 0; i < mask.size(); ++i) out.push_back(float(mask[i] + 2 * hidden_mask[i]));
    return out;
  };
  expect_thread_count_independent(run);
}

TEST(Dropout, RejectsProbabilityOutsideZeroToOne) {
  std::vector<float> x(8, 1.f);
  std::vector<uint8_t> mask(8);
  EXPECT_THROW(dropout_hidden_forward(x.data(), mask.data(), x.data(), 1, 1, 8, 0, 0, 1.f, kKey),
               std::logic_error);
  EXPECT_THROW(dropout_apply(x.data(), x.data(), mask.data(), 8, -0.1f), std::logic_error);
}

}  // namespace
