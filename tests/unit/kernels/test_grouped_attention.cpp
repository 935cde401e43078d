// Tests of grouped-query attention (Note [Grouped-query attention] in runtime/op_args.h) in the
// CPU kernels: every operator with r = group_size query heads per kv head against the same
// operator on multi-head inputs whose kv heads are repeated r times, for r = 1, 2, 4 and H
// (multi-query), with dropout on and off. Outputs per query head (ctx, lse, dq) are equal bit
// for bit; a kv head's dk, dv are the sum of its repeated heads' gradients to 1e-6 (the kernels
// add each head's share as they compute it, fused into the product's rounding). Also the
// layouts, the thread-count determinism and the argument checks.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cpu/flash_block.h"
#include "runtime/kernels/cpu/softmax.h"

namespace {

using namespace runtime;
using namespace runtime::cpu;
using namespace kernel_test;

const DropoutKey kKey = make_dropout_key(7, 11, 2, DropoutOp::attention_probs);

// The heads of a case: H query heads, r per kv head, G = H / r kv heads, D features each.
struct Group {
  int64_t B, H, r, D;
  int64_t G() const { return H / r; }
  // Elements of a grouped qkv (rows, B, G*(r+2)*D), of the query-head tensors (rows, B, H*D),
  // and of the kv-head ones (rows, B, G*2*D).
  int64_t qkv(int64_t rows) const { return rows * B * G() * (r + 2) * D; }
  int64_t queries(int64_t rows) const { return rows * B * H * D; }
  int64_t key_values(int64_t rows) const { return rows * B * G() * 2 * D; }
  Group multi_head() const { return {B, H, 1, D}; }
};

// A grouped qkv (rows, B, G*(r+2)*D) as the multi-head qkv (rows, B, H*3*D) whose head h holds
// q_h and the k, v of its kv head h / r.
std::vector<float> repeat_qkv(const std::vector<float>& qkv, int64_t rows, const Group& s) {
  const int64_t D = s.D, width = (s.r + 2) * D;
  std::vector<float> out(s.multi_head().qkv(rows));
  for (int64_t p = 0; p < rows * s.B; ++p)
    for (int64_t h = 0; h < s.H; ++h) {
      const float* group = &qkv[(p * s.G() + h / s.r) * width];
      float* head = &out[(p * s.H + h) * 3 * D];
      std::copy_n(group + h % s.r * D, D, head);
      std::copy_n(group + s.r * D, 2 * D, head + D);
    }
  return out;
}

// The inverse on gradients: dq per query head, a kv head's dk and dv the sum of its r repeated
// heads' in increasing order (float).
std::vector<float> sum_repeated_dqkv(const std::vector<float>& dqkv, int64_t rows, const Group& s) {
  const int64_t D = s.D, width = (s.r + 2) * D;
  std::vector<float> out(s.qkv(rows), 0.f);
  for (int64_t p = 0; p < rows * s.B; ++p)
    for (int64_t h = 0; h < s.H; ++h) {
      float* group = &out[(p * s.G() + h / s.r) * width];
      const float* head = &dqkv[(p * s.H + h) * 3 * D];
      std::copy_n(head, D, group + h % s.r * D);
      for (int64_t e = 0; e < 2 * D; ++e)
        group[s.r * D + e] = h % s.r == 0 ? head[D + e] : group[s.r * D + e] + head[D + e];
    }
  return out;
}

// kv (rows, B, G*2*D) repeated to (rows, B, H*2*D), and the gradients summed back.
std::vector<float> repeat_kv(const std::vector<float>& kv, int64_t rows, const Group& s) {
  std::vector<float> out(s.multi_head().key_values(rows));
  for (int64_t p = 0; p < rows * s.B; ++p)
    for (int64_t h = 0; h < s.H; ++h)
      std::copy_n(&kv[(p * s.G() + h / s.r) * 2 * s.D], 2 * s.D, &out[(p * s.H + h) * 2 * s.D]);
  return out;
}
std::vector<float> sum_repeated_dkv(const std::vector<float>& dkv, int64_t rows, const Group& s) {
  std::vector<float> out(s.key_values(rows), 0.f);
  for (int64_t p = 0; p < rows * s.B; ++p)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t e = 0; e < 2 * s.D; ++e) {
        float& sum = out[(p * s.G() + h / s.r) * 2 * s.D + e];
        const float x = dkv[(p * s.H + h) * 2 * s.D + e];
        sum = h % s.r == 0 ? x : sum + x;
      }
  return out;
}

// max |got - want| / max |want| (NaN counts as inf).
double relative_to_max(const std::vector<float>& got, const std::vector<float>& want) {
  double error = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(double{got[i]} - double{want[i]});
    error = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(error, e);
    scale = std::max(scale, std::fabs(double{want[i]}));
  }
  return scale > 0 ? error / scale : error;
}

// The query features (dq) and the kv features (dk, dv) of a grouped dqkv, apart.
struct QkvParts {
  std::vector<float> queries, key_values;
};
QkvParts parts(const std::vector<float>& qkv, int64_t rows, const Group& s) {
  QkvParts out;
  const int64_t D = s.D, width = (s.r + 2) * D;
  for (int64_t p = 0; p < rows * s.B * s.G(); ++p) {
    out.queries.insert(out.queries.end(), &qkv[p * width], &qkv[p * width + s.r * D]);
    out.key_values.insert(out.key_values.end(), &qkv[p * width + s.r * D], &qkv[(p + 1) * width]);
  }
  return out;
}

FlashAttentionDims make_dims(int64_t T, const Group& s, float p) {
  return FlashAttentionDims{.seq_len = T,
                            .micro_batch = s.B,
                            .heads = s.H,
                            .head_dim = s.D,
                            .head_offset = 3,
                            .sample_offset = 5,
                            .scale = 1.f / std::sqrt(float(s.D)),
                            .dropout_prob = p,
                            .dropout_key = kKey,
                            .group_size = s.r};
}

// The unfused chain and its backward on a grouped qkv (as the layer runs it): ctx, then dqkv.
struct UnfusedResult {
  std::vector<float> ctx, dqkv;
};
UnfusedResult unfused(const std::vector<float>& qkv, const std::vector<float>& dctx,
                      const FlashAttentionDims& d) {
  const int64_t T = d.seq_len, B = d.micro_batch, H = d.heads, D = d.head_dim, r = d.group_size;
  const int64_t BH = B * H, heads = BH * T * D, kv_heads = heads / r, scores = BH * T * T;
  std::vector<float> q(heads), k(kv_heads), v(kv_heads), probs(scores), dropped(scores);
  std::vector<float> ctx_heads(heads), dprobs(scores), dq(heads), dk(kv_heads), dv(kv_heads);
  std::vector<uint8_t> mask(scores);
  UnfusedResult out{std::vector<float>(heads), std::vector<float>(qkv.size())};
  split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, B, H, D, r);
  attention_scores_forward(probs.data(), q.data(), k.data(), BH, T, D, d.scale, r);
  causal_softmax_forward(probs.data(), probs.data(), BH, T, {});
  dropout_attention_forward(dropped.data(), mask.data(), probs.data(), B, H, T, d.head_offset,
                            d.sample_offset, d.dropout_prob, d.dropout_key);
  attention_context_forward(ctx_heads.data(), dropped.data(), v.data(), BH, T, D, r);
  merge_heads(out.ctx.data(), ctx_heads.data(), T, B, H, D);
  split_heads(ctx_heads.data(), dctx.data(), T, B, H, D);
  attention_context_backward(dprobs.data(), dv.data(), ctx_heads.data(), dropped.data(), v.data(),
                             BH, T, D, r);
  dropout_backward(dprobs.data(), dprobs.data(), mask.data(), scores, d.dropout_prob);
  causal_softmax_backward(dprobs.data(), dprobs.data(), probs.data(), BH, T, {});
  attention_scores_backward(dq.data(), dk.data(), dprobs.data(), q.data(), k.data(), BH, T, D,
                            d.scale, r);
  merge_qkv_heads(out.dqkv.data(), dq.data(), dk.data(), dv.data(), T, B, H, D, r);
  return out;
}

struct FlashResult {
  std::vector<float> ctx, lse, dqkv;
};
FlashResult flash(const std::vector<float>& qkv, const std::vector<float>& dctx,
                  const FlashAttentionDims& d) {
  const int64_t queries = d.seq_len * d.micro_batch * d.heads;
  FlashResult f{filled(queries * d.head_dim, kNaN), filled(queries, kNaN),
                filled(static_cast<int64_t>(qkv.size()), kNaN)};
  flash_attention_forward(f.ctx.data(), f.lse.data(), qkv.data(), d);
  flash_attention_backward(f.dqkv.data(), dctx.data(), qkv.data(), f.ctx.data(), f.lse.data(), d);
  return f;
}

constexpr int64_t kHeads = 8;

// (query heads per kv head, dropout probability).
class GroupedAttention : public ::testing::TestWithParam<std::tuple<int64_t, float>> {
 protected:
  Group group() const { return {2, kHeads, std::get<0>(GetParam()), 24}; }
  float p() const { return std::get<1>(GetParam()); }
};

TEST_P(GroupedAttention, LayoutsHoldEachQueryHeadAndEachKvHeadOnce) {
  const Group s = group();
  const int64_t T = 5, D = s.D;
  const auto qkv = random_vector(s.qkv(T), 1);
  const auto repeated = repeat_qkv(qkv, T, s);
  std::vector<float> q(s.queries(T)), k(s.key_values(T) / 2), v(k.size());
  split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, s.B, s.H, D, s.r);
  std::vector<float> q_want(q.size()), k_want(s.queries(T)), v_want(s.queries(T));
  split_qkv_heads(q_want.data(), k_want.data(), v_want.data(), repeated.data(), T, s.B, s.H, D);
  EXPECT_TRUE(bitwise_equal(q, q_want));
  for (int64_t b = 0; b < s.B; ++b)  // kv head g of sample b is repeated head b*H + g*r
    for (int64_t g = 0; g < s.G(); ++g) {
      const int64_t from = (b * s.H + g * s.r) * T * D, to = (b * s.G() + g) * T * D;
      EXPECT_TRUE(std::equal(k.begin() + to, k.begin() + to + T * D, k_want.begin() + from));
      EXPECT_TRUE(std::equal(v.begin() + to, v.begin() + to + T * D, v_want.begin() + from));
    }
  std::vector<float> merged(qkv.size(), kNaN);
  merge_qkv_heads(merged.data(), q.data(), k.data(), v.data(), T, s.B, s.H, D, s.r);
  EXPECT_TRUE(bitwise_equal(merged, qkv)) << "merge_qkv_heads inverts split_qkv_heads";

  const FlashRows rows{T, s.B, s.H, D, s.r};
  std::vector<float> kv(s.key_values(T), kNaN), dqkv(qkv.size(), kNaN);
  pack_kv(kv.data(), qkv.data(), rows);
  EXPECT_TRUE(bitwise_equal(kv, parts(qkv, T, s).key_values)) << "pack_kv: the G kv heads only";
  const QkvParts want = parts(qkv, T, s);
  assemble_qkv_grad(dqkv.data(), want.queries.data(), want.key_values.data(), rows);
  EXPECT_TRUE(bitwise_equal(dqkv, qkv)) << "assemble_qkv_grad";
}

TEST_P(GroupedAttention, UnfusedEqualsMultiHeadWithRepeatedKvHeads) {
  const Group s = group();
  const int64_t T = 37;
  const FlashAttentionDims d = make_dims(T, s, p());
  FlashAttentionDims multi = d;
  multi.group_size = 1;
  const auto qkv = random_vector(s.qkv(T), 2, -2.f, 2.f);
  const auto dctx = random_vector(s.queries(T), 3);
  const UnfusedResult got = unfused(qkv, dctx, d);
  const UnfusedResult want = unfused(repeat_qkv(qkv, T, s), dctx, multi);
  EXPECT_TRUE(bitwise_equal(got.ctx, want.ctx)) << "ctx";
  const QkvParts got_grad = parts(got.dqkv, T, s);
  const QkvParts want_grad = parts(sum_repeated_dqkv(want.dqkv, T, s), T, s);
  EXPECT_TRUE(bitwise_equal(got_grad.queries, want_grad.queries)) << "dq";
  EXPECT_LE(relative_to_max(got_grad.key_values, want_grad.key_values), 1e-6) << "dk, dv";
}

// The scores run one task per kv head when there are at least as many kv heads as threads, else
// one per query head (B * G + 1 threads here): the same bits on and below the diagonal.
TEST_P(GroupedAttention, ScoresForwardSameWithTasksPerKvHeadOrPerQueryHead) {
  const Group s = group();
  const int64_t T = 37, BH = s.B * s.H;
  const auto q = random_vector(s.queries(T), 9), k = random_vector(s.key_values(T) / 2, 10);
  auto lower_scores = [&](int threads) {
    auto scores = filled(BH * T * T, kNaN);
    with_threads(threads, [&] {
      attention_scores_forward(scores.data(), q.data(), k.data(), BH, T, s.D, 0.3f, s.r);
    });
    std::vector<float> lower;
    for (int64_t row = 0; row < BH * T; ++row)
      lower.insert(lower.end(), scores.begin() + row * T, scores.begin() + row * T + row % T + 1);
    return lower;
  };
  EXPECT_TRUE(bitwise_equal(lower_scores(1), lower_scores(static_cast<int>(s.B * s.G()) + 1)));
}

TEST_P(GroupedAttention, FlashEqualsMultiHeadWithRepeatedKvHeads) {
  const Group s = group();
  const int64_t T = 70;  // two query and key tiles of 64
  const FlashAttentionDims d = make_dims(T, s, p());
  FlashAttentionDims multi = d;
  multi.group_size = 1;
  const auto qkv = random_vector(s.qkv(T), 4, -2.f, 2.f);
  const auto dctx = random_vector(s.queries(T), 5);
  const FlashResult got = flash(qkv, dctx, d);
  const FlashResult want = flash(repeat_qkv(qkv, T, s), dctx, multi);
  EXPECT_TRUE(bitwise_equal(got.ctx, want.ctx)) << "ctx";
  EXPECT_TRUE(bitwise_equal(got.lse, want.lse)) << "lse";
  const QkvParts got_grad = parts(got.dqkv, T, s);
  const QkvParts want_grad = parts(sum_repeated_dqkv(want.dqkv, T, s), T, s);
  EXPECT_TRUE(bitwise_equal(got_grad.queries, want_grad.queries)) << "dq";
  EXPECT_LE(relative_to_max(got_grad.key_values, want_grad.key_values), 1e-6) << "dk, dv";
  // The unfused chain, too (as for multi-head attention: the same masks, 1e-5).
  const UnfusedResult chain = unfused(qkv, dctx, d);
  EXPECT_LE(relative_to_max(got.ctx, chain.ctx), 1e-5) << "ctx against the unfused chain";
  EXPECT_LE(relative_to_max(got.dqkv, chain.dqkv), 1e-5) << "dqkv against the unfused chain";
}

// A partly visible block (queries 40..109 over keys 10..99 of 120): ctx and lse, then dq and dkv
// added onto random accumulators.
TEST_P(GroupedAttention, FlashBlocksEqualMultiHeadWithRepeatedKvHeads) {
  const Group s = group();
  const int64_t T = 70, Tk = 90;
  FlashAttentionDims d = make_dims(T, s, p());
  d.kv_len = Tk;
  d.q_position = 40;
  d.kv_position = 10;
  d.full_len = 120;
  FlashAttentionDims multi = d;
  multi.group_size = 1;
  const auto qkv = random_vector(s.qkv(T), 6, -2.f, 2.f);
  std::vector<float> kv(s.key_values(Tk));
  pack_kv(kv.data(), random_vector(s.qkv(Tk), 7, -2.f, 2.f).data(), {Tk, s.B, s.H, s.D, s.r});
  const auto repeated_qkv = repeat_qkv(qkv, T, s), repeated_kv = repeat_kv(kv, Tk, s);
  const auto dctx = random_vector(s.queries(T), 8);
  auto ctx = filled(s.queries(T), kNaN), lse = filled(s.queries(T) / s.D, kNaN);
  auto ctx_want = ctx, lse_want = lse;
  flash_block_forward(ctx.data(), lse.data(), qkv.data(), kv.data(), d);
  flash_block_forward(ctx_want.data(), lse_want.data(), repeated_qkv.data(), repeated_kv.data(),
                      multi);
  EXPECT_TRUE(bitwise_equal(ctx, ctx_want)) << "ctx";
  EXPECT_TRUE(bitwise_equal(lse, lse_want)) << "lse";

  const auto dq_start = random_vector(s.queries(T), 9), dkv_start = random_vector(kv.size(), 10);
  auto dq = dq_start, dkv = dkv_start, dq_want = dq_start;
  auto repeated_dkv = filled(static_cast<int64_t>(repeated_kv.size()), 0.f);
  flash_block_backward(dq.data(), dkv.data(), dctx.data(), qkv.data(), kv.data(), ctx.data(),
                       lse.data(), d);
  flash_block_backward(dq_want.data(), repeated_dkv.data(), dctx.data(), repeated_qkv.data(),
                       repeated_kv.data(), ctx.data(), lse.data(), multi);
  auto dkv_want = sum_repeated_dkv(repeated_dkv, Tk, s);
  for (size_t i = 0; i < dkv_want.size(); ++i) dkv_want[i] += dkv_start[i];
  EXPECT_TRUE(bitwise_equal(dq, dq_want)) << "dq";
  EXPECT_LE(relative_to_max(dkv, dkv_want), 1e-6) << "dkv";
}

TEST_P(GroupedAttention, FlashBackwardIsBitIdenticalForOneAndTwoThreads) {
  const Group s = group();
  const int64_t T = 130;
  const FlashAttentionDims d = make_dims(T, s, p());
  const auto qkv = random_vector(s.qkv(T), 11, -2.f, 2.f);
  const auto dctx = random_vector(s.queries(T), 12);
  FlashResult one, two;
  with_threads(1, [&] { one = flash(qkv, dctx, d); });
  with_threads(2, [&] { two = flash(qkv, dctx, d); });
  EXPECT_TRUE(
      bitwise_equal(concat(one.ctx, one.lse, one.dqkv), concat(two.ctx, two.lse, two.dqkv)));
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, GroupedAttention,
                         ::testing::Combine(::testing::Values(int64_t{1}, int64_t{2}, int64_t{4},
                                                              kHeads),
                                            ::testing::Values(0.f, 0.1f)),
                         [](const auto& instance) {
                           return "r" + std::to_string(std::get<0>(instance.param)) +
                                  (std::get<1>(instance.param) > 0 ? "_dropout" : "");
                         });

TEST(GroupedAttention, RejectsAGroupSizeThatDoesNotDivideTheHeads) {
  std::vector<float> buffer(3 * 4 * 3 * 8, 0.f), lse(3 * 4);
  for (int64_t r : {0, 2}) {
    const FlashAttentionDims d = make_dims(4, Group{1, 3, r, 8}, 0.f);
    EXPECT_THROW(flash_attention_forward(buffer.data(), lse.data(), buffer.data(), d),
                 std::logic_error);
    EXPECT_THROW(pack_kv(buffer.data(), buffer.data(), {4, 1, 3, 8, r}), std::logic_error);
    EXPECT_THROW(
        split_qkv_heads(buffer.data(), buffer.data(), buffer.data(), buffer.data(), 4, 1, 3, 8, r),
        std::logic_error);
    EXPECT_THROW(
        attention_scores_forward(buffer.data(), buffer.data(), buffer.data(), 3, 4, 8, 1.f, r),
        std::logic_error);
  }
}

}  // namespace
