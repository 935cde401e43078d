// The Llama block's stash against its closed forms (docs/memory.md, "Llama blocks"), bf16
// activations, no dropout (Llama's default), tensor parallelism t without sequence parallelism:
// per layer sbh (8 + (4 + 4r + 6f) / t) + 2 a s^2 b / t + 8 sb bytes, r = groups / heads,
// f = ffn / hidden; the 8 sb are the two RMSNorms' fp32 rstd (no mean). With heads of another
// width than h / a (model.kv_channels) the attention terms are those of a x that width; Qwen3's q
// and k norms add their heads' inputs and rstd.
#include <gtest/gtest.h>

#include "model/layer_stash.h"
#include "recompute/memory_model.h"

namespace {

using model::LayerRecompute;
using model::RecomputeMode;

struct LlamaShape {
  int64_t s, b, h, a, g, F, t;  // sequence, micro batch, hidden, heads, kv groups, ffn, tp
  int64_t kv_channels = 0;      // the head width; 0: h / a
  int64_t D() const { return kv_channels > 0 ? kv_channels : h / a; }
};

model::LayerDims llama_dims(const LlamaShape& p, model::AttentionBackend attention) {
  model::LayerDims d;
  d.seq = p.s;
  d.micro_batch = p.b;
  d.hidden = p.h;
  d.heads = p.a / p.t;
  d.head_dim = p.D();
  d.ffn = p.F / p.t;
  d.activation_dtype = runtime::DType::bf16;
  d.features = {.attention = attention,
                .norm = model::Normalization::rmsnorm,
                .swiglu = true,
                .rope = true,
                .group_size = p.a / p.g,
                .linear_bias = false};
  return d;
}

// The closed form's terms, bytes.
struct Terms {
  int64_t hidden, qkv, ctx, fc1, act, probs, stats, lse;
};
Terms terms(const LlamaShape& p) {
  const int64_t D = p.D(), sb = p.s * p.b;
  return {.hidden = 8 * sb * p.h,  // input, ln1_out, residual, ln2_out
          .qkv = 2 * sb * (p.a + 2 * p.g) / p.t * D,
          .ctx = 2 * sb * p.a / p.t * D,
          .fc1 = 4 * sb * p.F / p.t,
          .act = 2 * sb * p.F / p.t,
          .probs = 2 * p.b * p.a / p.t * p.s * p.s,
          .stats = 8 * sb,
          .lse = 4 * p.a / p.t * sb};
}

class LlamaClosedForm : public ::testing::TestWithParam<LlamaShape> {};

TEST_P(LlamaClosedForm, NoRecompute) {
  const LlamaShape p = GetParam();
  const Terms x = terms(p);
  const auto unfused = model::layer_stash_spec(llama_dims(p, model::AttentionBackend::unfused), {});
  EXPECT_EQ(model::stash_kept_bytes(unfused),
            x.hidden + x.qkv + x.ctx + x.fc1 + x.act + x.probs + x.stats);
  const auto flash = model::layer_stash_spec(llama_dims(p, model::AttentionBackend::flash), {});
  EXPECT_EQ(model::stash_kept_bytes(flash),
            x.hidden + x.qkv + x.ctx + x.fc1 + x.act + x.lse + x.stats);
  // GQA: the key/value bytes shrink with the groups; the same shape as multi-head attention
  // keeps 4 (1 - r) sbh / t more.
  LlamaShape mha = p;
  mha.g = p.a;
  EXPECT_EQ(model::stash_kept_bytes(
                model::layer_stash_spec(llama_dims(mha, model::AttentionBackend::unfused), {})) -
                model::stash_kept_bytes(unfused),
            4 * p.s * p.b * (p.a - p.g) / p.t * p.D());
}

TEST_P(LlamaClosedForm, SelectiveModulesDropTheirTensors) {
  const LlamaShape p = GetParam();
  const Terms x = terms(p);
  const auto dims = llama_dims(p, model::AttentionBackend::unfused);
  auto dropped = [&](model::SelectiveModules modules) {
    return model::stash_dropped_bytes(
        model::layer_stash_spec(dims, LayerRecompute{RecomputeMode::selective, modules}));
  };
  EXPECT_EQ(dropped({.core_attn = true}), x.probs);
  EXPECT_EQ(dropped({.act = true}), x.act);
  EXPECT_EQ(dropped({.layernorm = true}), x.hidden / 2);  // ln1_out, ln2_out; rstd stays
  EXPECT_EQ(dropped({.mlp = true}), x.fc1 + x.act);
  const auto flash = llama_dims(p, model::AttentionBackend::flash);
  EXPECT_EQ(model::stash_dropped_bytes(model::layer_stash_spec(
                flash, LayerRecompute{RecomputeMode::selective, {.core_attn = true}})),
            x.ctx + x.lse);
  EXPECT_EQ(model::stash_kept_bytes(
                model::layer_stash_spec(dims, LayerRecompute{RecomputeMode::full, {}})),
            0);  // the checkpoint group keeps its input
}

// Qwen3's q and k norms (model.qk_layernorm) keep the a query and g key heads before the norms,
// 2 sb (a + g) D / t bytes, and each head's fp32 rstd, 4 sb (a + g) / t, under every plan but
// full: no selective module drops them.
TEST_P(LlamaClosedForm, QkNormsKeepTheirHeadsAndRstd) {
  const LlamaShape p = GetParam();
  const int64_t sb = p.s * p.b, heads = (p.a + p.g) / p.t;
  for (const model::AttentionBackend backend :
       {model::AttentionBackend::unfused, model::AttentionBackend::flash}) {
    model::LayerDims plain = llama_dims(p, backend), normed = plain;
    normed.features.qk_norm = true;
    for (const LayerRecompute entry :
         {LayerRecompute{}, LayerRecompute{RecomputeMode::selective,
                                           {.core_attn = true, .layernorm = true, .mlp = true}}}) {
      EXPECT_EQ(model::stash_kept_bytes(model::layer_stash_spec(normed, entry)) -
                    model::stash_kept_bytes(model::layer_stash_spec(plain, entry)),
                2 * sb * heads * p.D() + 4 * sb * heads);
    }
    EXPECT_EQ(model::stash_kept_bytes(
                  model::layer_stash_spec(normed, LayerRecompute{RecomputeMode::full, {}})),
              0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LlamaClosedForm,
                         ::testing::Values(LlamaShape{128, 2, 256, 8, 2, 688, 1},
                                           LlamaShape{256, 1, 512, 8, 8, 1376, 2},
                                           LlamaShape{64, 4, 4096, 32, 8, 14336, 4},
                                           LlamaShape{96, 3, 384, 6, 1, 1024, 1},
                                           // Mistral NeMo's heads: 128 wide, 4096 of 5120.
                                           LlamaShape{64, 2, 5120, 32, 8, 14336, 4, 128}));

}  // namespace
