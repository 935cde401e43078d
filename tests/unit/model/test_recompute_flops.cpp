// Recompute FLOPs counted by the executor: none spends none, a full group adds
// exactly one forward of its layers, selective core_attn adds only the score
// product, selective mlp only fc1.
#include <gtest/gtest.h>

#include "model/flops.h"
#include "model_test_util.h"

namespace {

using model::LayerRecompute;
using model::RecomputeMode;
using recompute::RecomputePlan;

int64_t recompute_flops(testing_support::TinyModel& m, const RecomputePlan& plan) {
  recompute::ChunkExecutor chunk(m.config, m.params, m.grads, plan, m.micro_batch, m.allocator);
  chunk.forward_step(m.microbatch(), {1, 1});
  chunk.backward_step(m.loss_scale());
  return chunk.recompute_flops();
}

TEST(RecomputeFlops, CountedPerPlan) {
  testing_support::TinyModel m(testing_support::tiny_config());
  const int64_t L = m.config.num_layers;
  const model::LayerFlops layer =
      model::layer_forward_flops(model::layer_dims(m.config, m.micro_batch, true));
  EXPECT_EQ(recompute_flops(m, RecomputePlan::uniform(L, {})), 0);
  EXPECT_EQ(recompute_flops(m, RecomputePlan::uniform(L, {RecomputeMode::full, {}}, 2)),
            L * layer.total());
  RecomputePlan one_full = RecomputePlan::uniform(L, {});
  one_full.layers[1] = {RecomputeMode::full, {}};
  one_full.group[1] = 0;
  EXPECT_EQ(recompute_flops(m, one_full), layer.total());
  EXPECT_EQ(recompute_flops(
                m, RecomputePlan::uniform(L, {RecomputeMode::selective, {.core_attn = true}})),
            L * layer.scores);
  EXPECT_EQ(
      recompute_flops(m, RecomputePlan::uniform(L, {RecomputeMode::selective, {.mlp = true}})),
      L * layer.fc1);
  EXPECT_EQ(recompute_flops(m, RecomputePlan::uniform(L, {RecomputeMode::selective,
                                                          {.act = true, .layernorm = true}})),
            0);
  // The score product: 2 * B * H * T * T * D.
  EXPECT_EQ(layer.scores, 2 * m.micro_batch * m.config.num_attention_heads * m.config.seq_length *
                              m.config.seq_length * m.config.head_dim());
}

}  // namespace
