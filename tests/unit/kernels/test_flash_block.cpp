// Tests of the flash block kernels (ring attention): one diagonal, fully visible or partly
// visible block against a double reference with the unsharded sequence's dropout mask; the
// blocks every cp rank runs, merged, against one whole-sequence flash call (ctx, lse, dqkv);
// the dropped elements one by one; bitwise determinism across thread counts; the layout ops.
#include <cstdio>

#include "kernel_test_util.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cpu/flash_block.h"

namespace {

using namespace runtime;
using namespace runtime::cpu;
using namespace kernel_test;

const DropoutKey kKey = make_dropout_key(7, 11, 2, DropoutOp::attention_probs);
const float kMinusInf = -std::numeric_limits<float>::infinity();

// B, H, D and dropout of a case; head_offset 3 and sample_offset 5 (a tp shard of a dp rank).
struct Sizes {
  int64_t B, H, D;
  float p;
};

FlashAttentionDims whole_dims(int64_t T, const Sizes& s) {
  return FlashAttentionDims{.seq_len = T,
                            .micro_batch = s.B,
                            .heads = s.H,
                            .head_dim = s.D,
                            .head_offset = 3,
                            .sample_offset = 5,
                            .scale = 1.f / std::sqrt(float(s.D)),
                            .dropout_prob = s.p,
                            .dropout_key = kKey};
}

// The block of queries [q_position, q_position + rows) over keys [kv_position, + kv_len) of a
// sequence of full_len.
FlashAttentionDims block_dims(const FlashAttentionDims& whole, int64_t rows, int64_t kv_len,
                              int64_t q_position, int64_t kv_position) {
  FlashAttentionDims d = whole;
  d.seq_len = rows;
  d.kv_len = kv_len;
  d.q_position = q_position;
  d.kv_position = kv_position;
  d.full_len = whole.seq_len;
  return d;
}

FlashRows rows_of(const FlashAttentionDims& d, int64_t rows) {
  return {rows, d.micro_batch, d.heads, d.head_dim};
}

// Rows [first, first + count) of a (T, B, width) tensor, and writing them back.
std::vector<float> rows_slice(const std::vector<float>& t, int64_t row_floats, int64_t first,
                              int64_t count) {
  return {t.begin() + first * row_floats, t.begin() + (first + count) * row_floats};
}
void put_rows(std::vector<float>& t, const std::vector<float>& rows, int64_t row_floats,
              int64_t first) {
  std::copy(rows.begin(), rows.end(), t.begin() + first * row_floats);
}

std::vector<float> packed_kv(const std::vector<float>& qkv, const FlashRows& sizes) {
  std::vector<float> kv(sizes.rows * sizes.micro_batch * sizes.heads * 2 * sizes.head_dim, kNaN);
  pack_kv(kv.data(), qkv.data(), sizes);
  return kv;
}

// max |got - want| / max |want| (NaN counts as inf).
double relative_to_max(const std::vector<float>& got, const std::vector<double>& want) {
  double error = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(double{got[i]} - want[i]);
    error = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(error, e);
    scale = std::max(scale, std::fabs(want[i]));
  }
  return scale > 0 ? error / scale : error;
}
double relative_to_max(const std::vector<float>& got, const std::vector<float>& want) {
  return relative_to_max(got, std::vector<double>(want.begin(), want.end()));
}

// The dropout factors F of the unsharded (B, H, L, L) probabilities, from the unfused dropout
// kernel itself: 1 / (1 - p) where kept, 0 where dropped.
std::vector<float> unsharded_factors(const FlashAttentionDims& whole) {
  const int64_t L = whole.seq_len, count = whole.micro_batch * whole.heads * L * L;
  std::vector<float> ones(count, 1.f), factors(count);
  std::vector<uint8_t> mask(count);
  dropout_attention_forward(factors.data(), mask.data(), ones.data(), whole.micro_batch,
                            whole.heads, L, whole.head_offset, whole.sample_offset,
                            whole.dropout_prob, whole.dropout_key);
  return factors;
}

// One block in double: ctx, lse, and (from dctx, with the block's own ctx and lse as the
// merged ones) dq, dk, dv, each in the kernels' layouts (dk and dv packed as dkv).
struct BlockReference {
  std::vector<double> ctx, lse, dq, dkv;
};

BlockReference reference_block(const std::vector<float>& qkv, const std::vector<float>& kv,
                               const std::vector<float>& dctx, const FlashAttentionDims& d,
                               const std::vector<float>& factors) {
  const int64_t T = d.seq_len, Tk = d.kv_len, BH = d.micro_batch * d.heads, D = d.head_dim;
  const int64_t L = d.full_len;
  BlockReference r{std::vector<double>(T * BH * D, 0.0), std::vector<double>(BH * T, 0.0),
                   std::vector<double>(T * BH * D, 0.0), std::vector<double>(Tk * BH * 2 * D, 0.0)};
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t b = bh / d.heads, h = bh % d.heads;
    const auto q = [&](int64_t i) { return &qkv[(i * BH + bh) * 3 * D]; };
    const auto k = [&](int64_t j) { return &kv[(j * BH + bh) * 2 * D]; };
    const auto v = [&](int64_t j) { return &kv[(j * BH + bh) * 2 * D + D]; };
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> s(Tk, -INFINITY);
      double m = -INFINITY;
      for (int64_t j = 0; j < Tk && d.kv_position + j <= d.q_position + i; ++j) {
        if (d.window > 0 && d.kv_position + j <= d.q_position + i - d.window) continue;
        double dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += double{q(i)[e]} * k(j)[e];
        s[j] = d.scale * dot;
        m = std::max(m, s[j]);
      }
      const int64_t lse_at = bh * T + i;
      if (m == -INFINITY) {
        r.lse[lse_at] = -INFINITY;
        continue;
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - m);
      r.lse[lse_at] = m + std::log(sum);
      const float* dout = &dctx[(i * BH + bh) * D];
      std::vector<double> pf(Tk, 0.0), dp(Tk, 0.0);
      double delta = 0;
      for (int64_t j = 0; j < Tk; ++j) {
        const double p = std::exp(s[j] - r.lse[lse_at]);
        const double f =
            factors[((b * d.heads + h) * L + d.q_position + i) * L + d.kv_position + j];
        pf[j] = p * f;
        for (int64_t e = 0; e < D; ++e) {
          r.ctx[(i * BH + bh) * D + e] += pf[j] * v(j)[e];
          dp[j] += double{dout[e]} * v(j)[e] * f;
        }
      }
      for (int64_t e = 0; e < D; ++e) delta += double{dout[e]} * r.ctx[(i * BH + bh) * D + e];
      for (int64_t j = 0; j < Tk; ++j) {
        const double p = std::exp(s[j] - r.lse[lse_at]), ds = p * (dp[j] - delta);
        for (int64_t e = 0; e < D; ++e) {
          r.dq[(i * BH + bh) * D + e] += d.scale * ds * k(j)[e];
          r.dkv[(j * BH + bh) * 2 * D + e] += d.scale * ds * q(i)[e];
          r.dkv[(j * BH + bh) * 2 * D + D + e] += pf[j] * dout[e];
        }
      }
    }
  }
  return r;
}

struct BlockCase {
  const char* name;
  int64_t rows, kv_len, q_position, kv_position, full_len;
  int64_t window = 0;
};

// One block alone against the double reference: ctx, lse (-inf where no key is visible), and
// dq, dkv added onto what the accumulators held.
void expect_block_matches_reference(const BlockCase& c, const Sizes& sizes) {
  SCOPED_TRACE(std::string(c.name) + (sizes.p > 0 ? ", dropout" : ""));
  const FlashAttentionDims whole = whole_dims(c.full_len, sizes);
  FlashAttentionDims d = block_dims(whole, c.rows, c.kv_len, c.q_position, c.kv_position);
  d.window = c.window;
  const int64_t BH = sizes.B * sizes.H, D = sizes.D;
  const auto qkv = random_vector(c.rows * BH * 3 * D, 1, -2.f, 2.f);
  const auto kv =
      packed_kv(random_vector(c.kv_len * BH * 3 * D, 2, -2.f, 2.f), rows_of(d, c.kv_len));
  const auto dctx = random_vector(c.rows * BH * D, 3);
  const BlockReference want = reference_block(qkv, kv, dctx, d, unsharded_factors(whole));

  auto ctx = filled(c.rows * BH * D, kNaN), lse = filled(BH * c.rows, kNaN);
  flash_block_forward(ctx.data(), lse.data(), qkv.data(), kv.data(), d);
  EXPECT_LE(relative_to_max(ctx, want.ctx), 1e-5) << "ctx";
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      ASSERT_EQ(lse[i], kMinusInf) << "lse " << i;
    } else {
      ASSERT_NEAR(lse[i], want.lse[i], 1e-5 * std::max(1.0, std::fabs(want.lse[i]))) << i;
    }
  }
  const auto dq_start = random_vector(c.rows * BH * D, 4);
  const auto dkv_start = random_vector(c.kv_len * BH * 2 * D, 5);
  auto dq = dq_start, dkv = dkv_start;
  flash_block_backward(dq.data(), dkv.data(), dctx.data(), qkv.data(), kv.data(), ctx.data(),
                       lse.data(), d);
  std::vector<double> dq_want(want.dq), dkv_want(want.dkv);
  for (size_t i = 0; i < dq_want.size(); ++i) dq_want[i] += dq_start[i];
  for (size_t i = 0; i < dkv_want.size(); ++i) dkv_want[i] += dkv_start[i];
  EXPECT_LE(relative_to_max(dq, dq_want), 1e-5) << "dq";
  EXPECT_LE(relative_to_max(dkv, dkv_want), 1e-5) << "dkv";
}

// Chunks of 24 and 80 rows (not whole tiles of 64), D 16 and 64.
TEST(FlashBlock, DiagonalBlockMatchesTheReference) {
  for (float p : {0.f, 0.1f}) {
    expect_block_matches_reference({"diagonal c24", 24, 24, 48, 48, 96}, {2, 2, 16, p});
    expect_block_matches_reference({"diagonal c80", 80, 80, 80, 80, 320}, {1, 2, 64, p});
  }
}

TEST(FlashBlock, FullyVisibleBlockMatchesTheReference) {
  for (float p : {0.f, 0.1f}) {
    expect_block_matches_reference({"visible c24", 24, 24, 72, 24, 96}, {2, 2, 16, p});
    expect_block_matches_reference({"visible c80", 80, 80, 240, 0, 320}, {1, 2, 64, p});
    // Fewer keys than queries, keys right before them.
    expect_block_matches_reference({"visible 70x40", 70, 40, 100, 60, 200}, {1, 3, 8, p});
  }
}

// Keys partly after the queries: the first rows see no key at all (ctx 0, lse -inf, dq 0).
TEST(FlashBlock, PartlyMaskedBlockMatchesTheReference) {
  for (float p : {0.f, 0.1f})
    expect_block_matches_reference({"partly masked", 90, 70, 10, 40, 160}, {1, 2, 16, p});
}

// Sliding windows (Note [Sliding window]): a window that cuts through the block, one that leaves
// the last queries no key of it (ctx 0, lse -inf), one of a single key, and one wider than the
// sequence.
TEST(FlashBlock, WindowedBlocksMatchTheReference) {
  for (float p : {0.f, 0.1f}) {
    expect_block_matches_reference({"window 50 visible", 80, 80, 240, 160, 320, 50}, {1, 2, 64, p});
    expect_block_matches_reference({"window 100 partly", 90, 70, 100, 40, 200, 100}, {1, 2, 16, p});
    expect_block_matches_reference({"window 1 diagonal", 24, 24, 48, 48, 96, 1}, {2, 2, 16, p});
    expect_block_matches_reference({"window 500", 70, 40, 100, 60, 200, 500}, {1, 3, 8, p});
  }
}

// The ring of cp = N: whole sequence qkv (T, B, H*3*D), T = 2 N c, chunk k = rows [k c, k c + c).
struct Ring {
  int64_t N, c;
  FlashAttentionDims whole;
  std::vector<int32_t> starts = {};  // document starts (T, B), or none
  // Those of the rows from `row` on, or null.
  const int32_t* starts_from(int64_t row) const {
    return starts.empty() ? nullptr : starts.data() + row * whole.micro_batch;
  }
  int64_t qkv_row() const { return whole.micro_batch * whole.heads * 3 * whole.head_dim; }
  int64_t ctx_row() const { return whole.micro_batch * whole.heads * whole.head_dim; }
};

// What the ranks compute: ctx and lse (B, H, T) merged per query chunk, then dqkv assembled from
// the dq and dkv accumulators. Rank r holds chunks r and 2N-1-r; at ring step s it has the
// key/value chunks of rank (r - s) mod N and runs every visible (query chunk, key chunk) pair.
struct RingResult {
  std::vector<float> ctx, lse, dqkv;
};

RingResult run_ring(const Ring& ring, const std::vector<float>& qkv,
                    const std::vector<float>& dctx) {
  const int64_t N = ring.N, c = ring.c, chunks = 2 * N, BH = ring.ctx_row() / ring.whole.head_dim;
  const FlashRows chunk_rows = rows_of(ring.whole, c);
  std::vector<std::vector<float>> q_chunk(chunks), kv(chunks), ctx(chunks), lse(chunks);
  std::vector<std::vector<float>> dq(chunks), dkv(chunks);
  for (int64_t k = 0; k < chunks; ++k) {
    q_chunk[k] = rows_slice(qkv, ring.qkv_row(), k * c, c);
    kv[k] = packed_kv(q_chunk[k], chunk_rows);
    ctx[k] = filled(c * ring.ctx_row(), 0.f);
    lse[k] = filled(BH * c, kMinusInf);
    dq[k] = filled(c * ring.ctx_row(), 0.f);
    dkv[k] = filled(c * 2 * ring.ctx_row(), 0.f);
  }
  // Every visible pair of rank r at step s, in the ranks' order.
  const auto for_each_block = [&](auto visit) {
    for (int64_t r = 0; r < N; ++r)
      for (int64_t s = 0; s < N; ++s) {
        const int64_t kv_rank = (r - s + N) % N;
        for (int64_t qc : {r, chunks - 1 - r})
          for (int64_t kc : {kv_rank, chunks - 1 - kv_rank})
            if (kc <= qc) visit(qc, kc, block_dims(ring.whole, c, c, qc * c, kc * c));
      }
  };
  auto ctx_block = filled(c * ring.ctx_row(), kNaN), lse_block = filled(BH * c, kNaN);
  for_each_block([&](int64_t qc, int64_t kc, const FlashAttentionDims& d) {
    flash_block_forward(ctx_block.data(), lse_block.data(), q_chunk[qc].data(), kv[kc].data(), d,
                        ring.starts_from(qc * c));
    flash_merge(ctx[qc].data(), lse[qc].data(), ctx_block.data(), lse_block.data(), chunk_rows);
  });
  const int64_t T = chunks * c;
  RingResult out{filled(T * ring.ctx_row(), kNaN), filled(BH * T, kNaN),
                 filled(T * ring.qkv_row(), kNaN)};
  for_each_block([&](int64_t qc, int64_t kc, const FlashAttentionDims& d) {
    const auto dctx_chunk = rows_slice(dctx, ring.ctx_row(), qc * c, c);
    flash_block_backward(dq[qc].data(), dkv[kc].data(), dctx_chunk.data(), q_chunk[qc].data(),
                         kv[kc].data(), ctx[qc].data(), lse[qc].data(), d,
                         ring.starts_from(qc * c));
  });
  for (int64_t k = 0; k < chunks; ++k) {
    put_rows(out.ctx, ctx[k], ring.ctx_row(), k * c);
    for (int64_t bh = 0; bh < BH; ++bh)
      std::copy_n(lse[k].begin() + bh * c, c, out.lse.begin() + bh * T + k * c);
    std::vector<float> dqkv(c * ring.qkv_row(), kNaN);
    assemble_qkv_grad(dqkv.data(), dq[k].data(), dkv[k].data(), chunk_rows);
    put_rows(out.dqkv, dqkv, ring.qkv_row(), k * c);
  }
  return out;
}

class FlashRing : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, float>> {};

// cp = N, chunk c, dropout p: the merged blocks equal one whole-sequence flash call within 1e-5
// of each tensor's largest magnitude.
TEST_P(FlashRing, MergedBlocksEqualTheWholeSequence) {
  const auto [N, c, p] = GetParam();
  const Ring ring{N, c, whole_dims(2 * N * c, {2, 2, 16, p})};
  const int64_t T = 2 * N * c;
  const auto qkv = random_vector(T * ring.qkv_row(), 11, -2.f, 2.f);
  const auto dctx = random_vector(T * ring.ctx_row(), 12);
  RingResult want{filled(T * ring.ctx_row(), kNaN), filled(4 * T, kNaN),
                  filled(T * ring.qkv_row(), kNaN)};
  flash_attention_forward(want.ctx.data(), want.lse.data(), qkv.data(), ring.whole);
  flash_attention_backward(want.dqkv.data(), dctx.data(), qkv.data(), want.ctx.data(),
                           want.lse.data(), ring.whole);
  const RingResult got = run_ring(ring, qkv, dctx);
  EXPECT_LE(relative_to_max(got.ctx, want.ctx), 1e-5) << "ctx";
  EXPECT_LE(relative_to_max(got.lse, want.lse), 1e-5) << "lse";
  EXPECT_LE(relative_to_max(got.dqkv, want.dqkv), 1e-5) << "dqkv";
}

INSTANTIATE_TEST_SUITE_P(Rings, FlashRing,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(24, 80),
                                            ::testing::Values(0.f, 0.1f)),
                         [](const auto& instance) {
                           return "cp" + std::to_string(std::get<0>(instance.param)) + "_c" +
                                  std::to_string(std::get<1>(instance.param)) +
                                  (std::get<2>(instance.param) > 0 ? "_dropout" : "");
                         });

// A sliding window over the ring: every pair of chunks runs, those wholly left of the window
// too (they add nothing), and the merge equals one windowed whole-sequence call.
TEST(FlashRing, WindowedMergedBlocksEqualTheWholeSequence) {
  for (const int64_t window : {int64_t{7}, int64_t{30}, int64_t{100}}) {
    SCOPED_TRACE("window " + std::to_string(window));
    FlashAttentionDims whole = whole_dims(4 * 2 * 24, {2, 2, 16, 0.1f});
    whole.window = window;
    const Ring ring{4, 24, whole};
    const int64_t T = 4 * 2 * 24;
    const auto qkv = random_vector(T * ring.qkv_row(), 11, -2.f, 2.f);
    const auto dctx = random_vector(T * ring.ctx_row(), 12);
    RingResult want{filled(T * ring.ctx_row(), kNaN), filled(4 * T, kNaN),
                    filled(T * ring.qkv_row(), kNaN)};
    flash_attention_forward(want.ctx.data(), want.lse.data(), qkv.data(), whole);
    flash_attention_backward(want.dqkv.data(), dctx.data(), qkv.data(), want.ctx.data(),
                             want.lse.data(), whole);
    const RingResult got = run_ring(ring, qkv, dctx);
    EXPECT_LE(relative_to_max(got.ctx, want.ctx), 1e-5) << "ctx";
    EXPECT_LE(relative_to_max(got.lse, want.lse), 1e-5) << "lse";
    EXPECT_LE(relative_to_max(got.dqkv, want.dqkv), 1e-5) << "dqkv";
  }
}

// Documents over the ring (Note [Document masking]): the starts of each query chunk's rows go with
// its blocks, and the merge equals one whole-sequence call with the same starts. Documents end
// inside chunks, on a chunk's edge and one past it; sample 1 has one-token documents early on.
// A query chunk can see nothing of a key chunk before its document (lse -inf, merged away).
TEST(FlashRing, DocumentMergedBlocksEqualTheWholeSequence) {
  const int64_t N = 4, c = 24, T = 2 * N * c, B = 2;
  for (const int64_t window : {int64_t{0}, int64_t{30}}) {
    SCOPED_TRACE("window " + std::to_string(window));
    Ring ring{N, c, whole_dims(T, {B, 2, 16, 0.1f})};
    ring.whole.window = window;
    ring.starts.resize(static_cast<size_t>(T * B));
    const std::vector<int64_t> ends[B] = {{10, 48, 49, 100, 150}, {1, 2, 3, 4, 72, 73}};
    for (int64_t b = 0; b < B; ++b) {
      int64_t start = 0;
      for (int64_t i = 0; i < T; ++i) {
        for (const int64_t e : ends[b])
          if (i == e) start = e;
        ring.starts[static_cast<size_t>(i * B + b)] = static_cast<int32_t>(start);
      }
    }
    const auto qkv = random_vector(T * ring.qkv_row(), 11, -2.f, 2.f);
    const auto dctx = random_vector(T * ring.ctx_row(), 12);
    RingResult want{filled(T * ring.ctx_row(), kNaN), filled(4 * T, kNaN),
                    filled(T * ring.qkv_row(), kNaN)};
    flash_attention_forward(want.ctx.data(), want.lse.data(), qkv.data(), ring.whole,
                            ring.starts.data());
    flash_attention_backward(want.dqkv.data(), dctx.data(), qkv.data(), want.ctx.data(),
                             want.lse.data(), ring.whole, ring.starts.data());
    const RingResult got = run_ring(ring, qkv, dctx);
    EXPECT_LE(relative_to_max(got.ctx, want.ctx), 1e-5) << "ctx";
    EXPECT_LE(relative_to_max(got.lse, want.lse), 1e-5) << "lse";
    EXPECT_LE(relative_to_max(got.dqkv, want.dqkv), 1e-5) << "dqkv";
  }
}

TEST(FlashRing, BitIdenticalAcrossThreadCounts) {
  const Ring ring{2, 80, whole_dims(320, {2, 3, 24, 0.1f})};
  const auto qkv = random_vector(320 * ring.qkv_row(), 13, -2.f, 2.f);
  const auto dctx = random_vector(320 * ring.ctx_row(), 14);
  const auto run = [&] {
    const RingResult r = run_ring(ring, qkv, dctx);
    return concat(r.ctx, r.lse, r.dqkv);
  };
  std::vector<float> one, two, three;
  with_threads(1, [&] { one = run(); });
  with_threads(2, [&] { two = run(); });
  with_threads(3, [&] { three = run(); });
  EXPECT_TRUE(bitwise_equal(one, two));
  EXPECT_TRUE(bitwise_equal(one, three));
}

// With T <= D, one-hot values V(key g) = e_g make a block's ctx(i, kv_position + j) its
// dropped probability, and one-hot dctx(i) = e_(q_position + i) make its dv(j, q_position + i)
// the same: both nonzero iff visible and kept by dropout_attention_forward on the unsharded
// (B, H, T, T) probabilities (p = 0.5). Every visible block of cp 1, 2 and 4 is checked;
// the last case puts elements past 2^34 and samples past 2^32 (Philox counter carries).
TEST(FlashBlock, DropsExactlyTheElementsOfTheUnshardedDropout) {
  struct Case {
    int64_t N, c, head_offset, sample_offset;
  };
  const int64_t straddling_head = (int64_t{1} << 34) / (96 * 96);
  double kept = 0, visible = 0;
  for (const Case cs : {Case{1, 33, 3, 5}, Case{2, 24, 3, 5}, Case{4, 16, 3, 5},
                        Case{2, 24, straddling_head, (int64_t{1} << 32) + 1}}) {
    const int64_t T = 2 * cs.N * cs.c, B = 2, H = 2, D = 128, BH = B * H;
    FlashAttentionDims whole = whole_dims(T, {B, H, D, 0.5f});
    whole.head_offset = cs.head_offset;
    whole.sample_offset = cs.sample_offset;
    auto qkv = random_vector(T * BH * 3 * D, 3, -0.5f, 0.5f);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t bh = 0; bh < BH; ++bh) {
        float* v = qkv.data() + (t * BH + bh) * 3 * D + 2 * D;
        std::fill(v, v + D, 0.f);
        v[t] = 1.f;
      }
    std::vector<float> ones(BH * T * T, 1.f), dropped(ones.size());
    std::vector<uint8_t> mask(ones.size());
    dropout_attention_forward(dropped.data(), mask.data(), ones.data(), B, H, T, whole.head_offset,
                              whole.sample_offset, 0.5f, kKey);
    for (int64_t qc = 0; qc < 2 * cs.N; ++qc)
      for (int64_t kc = 0; kc <= qc; ++kc) {
        const int64_t c = cs.c;
        const FlashAttentionDims d = block_dims(whole, c, c, qc * c, kc * c);
        const auto q = rows_slice(qkv, BH * 3 * D, qc * c, c);
        const auto kv = packed_kv(rows_slice(qkv, BH * 3 * D, kc * c, c), rows_of(d, c));
        auto ctx = filled(c * BH * D, kNaN), lse = filled(BH * c, kNaN);
        auto dctx = filled(c * BH * D, 0.f), dq = filled(c * BH * D, 0.f);
        auto dkv = filled(c * BH * 2 * D, 0.f);
        for (int64_t i = 0; i < c; ++i)
          for (int64_t bh = 0; bh < BH; ++bh) dctx[(i * BH + bh) * D + qc * c + i] = 1.f;
        flash_block_forward(ctx.data(), lse.data(), q.data(), kv.data(), d);
        flash_block_backward(dq.data(), dkv.data(), dctx.data(), q.data(), kv.data(), ctx.data(),
                             lse.data(), d);
        for (int64_t bh = 0; bh < BH; ++bh)
          for (int64_t i = 0; i < c; ++i)
            for (int64_t j = 0; j < c; ++j) {
              const int64_t gi = qc * c + i, gj = kc * c + j;
              const bool want = gj <= gi && mask[(bh * T + gi) * T + gj] == 1;
              ASSERT_EQ(ctx[(i * BH + bh) * D + gj] != 0.f, want)
                  << "forward, T " << T << " bh " << bh << " i " << gi << " j " << gj;
              ASSERT_EQ(dkv[(j * BH + bh) * 2 * D + D + gi] != 0.f, want)
                  << "backward, T " << T << " bh " << bh << " i " << gi << " j " << gj;
              kept += want;
              visible += gj <= gi;
            }
      }
  }
  EXPECT_NEAR(kept / visible, 0.5, 0.05);
}

TEST(FlashBlock, MergeIsLogAddExpAndSkipsEmptySides) {
  const FlashRows sizes{3, 2, 2, 5};  // 12 rows of lse, 3 * 4 positions of 5 features
  const int64_t rows = 12, count = 12 * 5;
  auto ctx = random_vector(count, 21), ctx_block = random_vector(count, 22);
  auto lse = random_vector(rows, 23, -3.f, 3.f), lse_block = random_vector(rows, 24, -3.f, 3.f);
  lse[0] = kMinusInf;        // empty running side: takes the block
  lse_block[1] = kMinusInf;  // empty block: keeps the running side
  lse[2] = lse_block[2] = kMinusInf;
  ctx[0 * 5] = kNaN;  // lse row 0 is (b 0, h 0, t 0): position 0; not read
  std::vector<double> want_ctx(count), want_lse(rows);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t bh = row / 3, t = row % 3, at = (t * 4 + bh) * 5;
    const double a = lse[row], b = lse_block[row];
    const double merged = (a == -INFINITY && b == -INFINITY) ? -INFINITY
                          : a == -INFINITY                   ? b
                          : b == -INFINITY                   ? a
                                                             : std::log(std::exp(a) + std::exp(b));
    want_lse[row] = merged;
    for (int64_t e = 0; e < 5; ++e) {
      const double wa = a == -INFINITY ? 0 : std::exp(a - merged);
      const double wb = b == -INFINITY ? 0 : std::exp(b - merged);
      const double keep = a == -INFINITY && b == -INFINITY ? 1 : wa;
      want_ctx[at + e] = (keep == 0 ? 0.0 : keep * ctx[at + e]) + wb * ctx_block[at + e];
    }
  }
  flash_merge(ctx.data(), lse.data(), ctx_block.data(), lse_block.data(), sizes);
  EXPECT_LE(relative_to_max(ctx, want_ctx), 1e-6);
  EXPECT_EQ(lse[2], kMinusInf);
  want_lse[2] = 0, lse[2] = 0;
  EXPECT_LE(relative_to_max(lse, want_lse), 1e-6);
}

TEST(FlashBlock, PackAndAssembleMoveTheHeadsFeatures) {
  const FlashRows sizes{3, 2, 3, 4};
  const int64_t positions = 3 * 2 * 3, D = 4;
  const auto qkv = random_vector(positions * 3 * D, 31);
  const auto kv = packed_kv(qkv, sizes);
  const auto dq = random_vector(positions * D, 32);
  std::vector<float> dqkv(qkv.size(), kNaN);
  assemble_qkv_grad(dqkv.data(), dq.data(), kv.data(), sizes);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t e = 0; e < D; ++e) {
      ASSERT_EQ(kv[p * 2 * D + e], qkv[p * 3 * D + D + e]) << "k, position " << p;
      ASSERT_EQ(kv[p * 2 * D + D + e], qkv[p * 3 * D + 2 * D + e]) << "v, position " << p;
      ASSERT_EQ(dqkv[p * 3 * D + e], dq[p * D + e]);
      ASSERT_EQ(dqkv[p * 3 * D + D + e], qkv[p * 3 * D + D + e]);
      ASSERT_EQ(dqkv[p * 3 * D + 2 * D + e], qkv[p * 3 * D + 2 * D + e]);
    }
}

TEST(FlashBlock, RejectsBlocksOutsideTheSequence) {
  std::vector<float> buffer(16 * 3 * 8, 0.f), lse(16);
  const FlashAttentionDims whole = whole_dims(16, {1, 1, 8, 0.f});
  for (const FlashAttentionDims& d : {block_dims(whole, 8, 8, 9, 0), block_dims(whole, 8, 8, 0, 9),
                                      block_dims(whole, 8, 8, -1, 0)}) {
    EXPECT_THROW(flash_block_forward(buffer.data(), lse.data(), buffer.data(), buffer.data(), d),
                 std::logic_error);
  }
  // The whole-sequence kernels take no block.
  EXPECT_THROW(flash_attention_forward(buffer.data(), lse.data(), buffer.data(),
                                       block_dims(whole, 8, 8, 8, 0)),
               std::logic_error);
}

}  // namespace
