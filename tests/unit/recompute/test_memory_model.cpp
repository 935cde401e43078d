// The memory model against the closed forms of Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models") when given
// bf16 activations and 1-byte masks. The model also counts what the paper
// neglects: fp32 mean and rstd of the two layernorms, 16 sb bytes per layer.
#include <gtest/gtest.h>

#include "model/layer_stash.h"
#include "recompute/memory_model.h"

namespace {

using model::LayerRecompute;
using model::RecomputeMode;

struct PaperShape {
  int64_t s, b, h, a, t;  // sequence, micro batch, hidden, heads, tensor-parallel size
};

model::LayerDims bf16_dims(const PaperShape& p) {
  model::LayerDims d;
  d.seq = p.s;
  d.micro_batch = p.b;
  d.hidden = p.h;
  d.heads = p.a / p.t;
  d.head_dim = p.h / p.a;
  d.ffn = 4 * p.h / p.t;
  d.hidden_dropout = 0.1f;
  d.attention_dropout = 0.1f;
  d.activation_dtype = runtime::DType::bf16;
  return d;
}

int64_t layernorm_stats(const PaperShape& p) {
  return 16 * p.s * p.b;
}

class Korthikanti : public ::testing::TestWithParam<PaperShape> {};

TEST_P(Korthikanti, NoRecomputeIsSbh34Plus5asOverH) {
  const PaperShape p = GetParam();
  const auto spec = model::layer_stash_spec(bf16_dims(p), {});
  // sbh (10 + 24/t + 5as/(ht)); with t = 1 this is sbh (34 + 5as/h).
  const int64_t sbh = p.s * p.b * p.h;
  const int64_t expected = 10 * sbh + 24 * sbh / p.t + 5 * p.a * p.s * p.s * p.b / p.t;
  EXPECT_EQ(model::stash_kept_bytes(spec), expected + layernorm_stats(p));
}

TEST_P(Korthikanti, SelectiveCoreAttentionIsSbh34) {
  const PaperShape p = GetParam();
  const LayerRecompute entry{RecomputeMode::selective, {.core_attn = true}};
  const auto spec = model::layer_stash_spec(bf16_dims(p), entry);
  const int64_t sbh = p.s * p.b * p.h;
  EXPECT_EQ(model::stash_kept_bytes(spec), 10 * sbh + 24 * sbh / p.t + layernorm_stats(p));
  EXPECT_EQ(model::stash_dropped_bytes(spec), 5 * p.a * p.s * p.s * p.b / p.t);
}

// Flash attention keeps neither scores nor probabilities nor their mask: the 5as/h term is gone.
// What stays is 34 sbh / t-scaled as above (qkv in place of q, k, v: the same bytes), plus the
// fp32 row log-sum-exp, 4 a s b / t bytes. Selective core_attn drops the attention output
// (2 sbh / t) and the log-sum-exp.
TEST_P(Korthikanti, FlashHasNoSquareTerm) {
  const PaperShape p = GetParam();
  model::LayerDims dims = bf16_dims(p);
  dims.features.attention = model::AttentionBackend::flash;
  const int64_t sbh = p.s * p.b * p.h, lse = 4 * p.a * p.s * p.b / p.t;
  EXPECT_EQ(model::stash_kept_bytes(model::layer_stash_spec(dims, {})),
            10 * sbh + 24 * sbh / p.t + lse + layernorm_stats(p));
  const auto selective =
      model::layer_stash_spec(dims, LayerRecompute{RecomputeMode::selective, {.core_attn = true}});
  EXPECT_EQ(model::stash_dropped_bytes(selective), 2 * sbh / p.t + lse);
}

TEST_P(Korthikanti, FullRecomputeKeeps2sbhPerLayer) {
  const PaperShape p = GetParam();
  model::GptConfig config;
  config.num_layers = 6;
  config.hidden_size = p.h;
  config.num_attention_heads = p.a;
  config.seq_length = p.s;
  const auto plan =
      recompute::RecomputePlan::uniform(6, LayerRecompute{RecomputeMode::full, {}}, 1);
  const auto m = recompute::predict_activation_memory(config, bf16_dims(p), plan);
  for (const recompute::LayerMemory& layer : m.layers) {
    EXPECT_EQ(layer.checkpoint, 2 * p.s * p.b * p.h);
    EXPECT_EQ(layer.kept, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Korthikanti,
                         ::testing::Values(PaperShape{2048, 1, 12288, 96, 1},  // GPT-3 175B
                                           PaperShape{2048, 1, 12288, 96, 8},  // with TP 8
                                           PaperShape{128, 4, 256, 8, 2}));

}  // namespace
