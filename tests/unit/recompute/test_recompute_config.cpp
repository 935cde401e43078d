// Resolution of recompute presets and overrides into per-layer plans, and the
// rejection of every combination Megatron rejects (and a few more).
#include <gtest/gtest.h>

#include "recompute/recompute_config.h"
#include "runtime/error.h"

namespace {

using model::RecomputeMode;
using recompute::ChunkLayers;
using recompute::LayerOverride;
using recompute::Method;
using recompute::RecomputeConfig;
using recompute::RecomputePlan;
using recompute::StageOverride;

RecomputeConfig full(Method method, int64_t num_layers) {
  RecomputeConfig c;
  c.preset.granularity = model::RecomputeMode::full;
  c.preset.method = method;
  c.preset.num_layers = num_layers;
  return c;
}

std::vector<std::vector<ChunkLayers>> one_stage(int64_t layers) {
  return {{{0, layers}}};
}

std::string modes(const RecomputePlan& plan) {
  std::string s;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    switch (plan.layers[i].mode) {
      case RecomputeMode::none:
        s += "n";
        break;
      case RecomputeMode::selective:
        s += "s";
        break;
      case RecomputeMode::full:
        s += std::to_string(plan.group[i]);
        break;
    }
  }
  return s;
}

std::string error_of(const RecomputeConfig& c, int64_t layers,
                     const std::vector<std::vector<ChunkLayers>>& chunks) {
  try {
    recompute::validate_recompute(c, layers, chunks);
  } catch (const runtime::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RecomputeResolve, NoneByDefault) {
  EXPECT_EQ(modes(recompute::resolve_plan({}, 0, {{0, 4}})), "nnnn");
}

TEST(RecomputeResolve, FullUniformGroupsConsecutiveLayers) {
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::uniform, 1), 0, {{0, 4}})), "0123");
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::uniform, 2), 0, {{0, 6}})), "001122");
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::uniform, 4), 0, {{0, 6}})), "000011");
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::uniform, 6), 0, {{0, 6}})), "000000");
}

TEST(RecomputeResolve, FullBlockRecomputesFirstLayersOfEachChunk) {
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::block, 2), 0, {{0, 5}})), "01nnn");
  // Two model chunks on one stage (interleaved pipeline): per chunk.
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::block, 1), 1, {{2, 2}, {6, 2}})), "0n1n");
  // Groups never cross a chunk boundary.
  EXPECT_EQ(modes(recompute::resolve_plan(full(Method::uniform, 2), 0, {{0, 3}, {6, 3}})),
            "001223");
}

TEST(RecomputeResolve, SelectiveDefaultsToCoreAttention) {
  RecomputeConfig c;
  c.preset.granularity = model::RecomputeMode::selective;
  const RecomputePlan plan = recompute::resolve_plan(c, 0, {{0, 2}});
  EXPECT_EQ(modes(plan), "ss");
  EXPECT_EQ(plan.layers[0].modules, (model::SelectiveModules{.core_attn = true}));
  c.preset.modules = model::SelectiveModules{.act = true, .mlp = true};
  EXPECT_EQ(recompute::resolve_plan(c, 0, {{0, 2}}).layers[1].modules,
            (model::SelectiveModules{.act = true, .mlp = true}));
}

TEST(RecomputeResolve, LayerOverridesWinOverStageOverridesWinOverPreset) {
  RecomputeConfig c = full(Method::uniform, 2);
  c.stages.push_back({1, {model::RecomputeMode::selective, {}, {}, {}}});
  c.layers.push_back({1, 1, {model::RecomputeMode::none, {}, {}, {}}});
  c.layers.push_back({5, 7, {model::RecomputeMode::full, {}, 3, {}}});
  // stage 0: layers 0-3 uniform 2, layer 1 forced none (splits group 0)
  EXPECT_EQ(modes(recompute::resolve_plan(c, 0, {{0, 4}})), "0n11");
  // stage 1: layers 4-7 selective, 5-7 one full group of 3
  EXPECT_EQ(modes(recompute::resolve_plan(c, 1, {{4, 4}})), "s000");
}

TEST(RecomputeValidate, AcceptsMegatronCombinations) {
  EXPECT_EQ(error_of(full(Method::uniform, 2), 4, one_stage(4)), "");
  EXPECT_EQ(error_of(full(Method::block, 4), 4, one_stage(4)), "");
  RecomputeConfig selective;
  selective.preset.granularity = model::RecomputeMode::selective;
  EXPECT_EQ(error_of(selective, 4, one_stage(4)), "");
}

TEST(RecomputeValidate, RejectsMethodWithSelective) {
  RecomputeConfig c;
  c.preset.granularity = model::RecomputeMode::selective;
  c.preset.method = Method::uniform;
  EXPECT_NE(
      error_of(c, 4, one_stage(4)).find("recompute.method: not allowed with granularity selective"),
      std::string::npos);
}

TEST(RecomputeValidate, RejectsNumLayersWithSelectiveAndNone) {
  RecomputeConfig c;
  c.preset.num_layers = 2;
  EXPECT_NE(
      error_of(c, 4, one_stage(4)).find("recompute.num_layers: not allowed with granularity none"),
      std::string::npos);
  c.preset.granularity = model::RecomputeMode::selective;
  EXPECT_NE(error_of(c, 4, one_stage(4)).find("recompute.num_layers"), std::string::npos);
}

TEST(RecomputeValidate, RequiresMethodWithFull) {
  RecomputeConfig c;
  c.preset.granularity = model::RecomputeMode::full;
  EXPECT_NE(error_of(c, 4, one_stage(4)).find("recompute.method: required with granularity full"),
            std::string::npos);
}

TEST(RecomputeValidate, RejectsNumLayersBeyondTheStage) {
  const std::string e = error_of(full(Method::block, 3), 4, {{{0, 2}}, {{2, 2}}});
  EXPECT_NE(e.find("recompute.num_layers: 3 > 2 layers"), std::string::npos) << e;
  EXPECT_NE(error_of(full(Method::uniform, 0), 4, one_stage(4)).find("must be >= 1, got 0"),
            std::string::npos);
}

TEST(RecomputeValidate, RejectsModulesOutsideSelective) {
  RecomputeConfig c = full(Method::uniform, 1);
  c.preset.modules = model::SelectiveModules{.act = true};
  EXPECT_NE(
      error_of(c, 4, one_stage(4)).find("recompute.modules: not allowed with granularity full"),
      std::string::npos);
  RecomputeConfig s;
  s.preset.granularity = model::RecomputeMode::selective;
  s.preset.modules = model::SelectiveModules{};
  EXPECT_NE(error_of(s, 4, one_stage(4)).find("recompute.modules: must name at least one"),
            std::string::npos);
}

TEST(RecomputeValidate, RejectsBadLayerRanges) {
  RecomputeConfig c;
  c.layers.push_back({0, 3, {model::RecomputeMode::full, {}, {}, {}}});
  c.layers.push_back({20, 40, {model::RecomputeMode::none, {}, {}, {}}});
  EXPECT_NE(
      error_of(c, 24, one_stage(24)).find("recompute.layers[1].range: last 40 >= num_layers 24"),
      std::string::npos);
  c.layers[1] = {3, 5, {model::RecomputeMode::none, {}, {}, {}}};
  EXPECT_NE(
      error_of(c, 24, one_stage(24))
          .find("recompute.layers[1].range: [3, 5] overlaps recompute.layers[0].range [0, 3]"),
      std::string::npos);
  c.layers[1] = {6, 5, {model::RecomputeMode::none, {}, {}, {}}};
  EXPECT_NE(error_of(c, 24, one_stage(24)).find("recompute.layers[1].range: [6, 5]"),
            std::string::npos);
}

TEST(RecomputeValidate, RejectsMethodInLayerOverrideAndOversizedGroups) {
  RecomputeConfig c;
  c.layers.push_back({0, 1, {model::RecomputeMode::full, Method::uniform, {}, {}}});
  EXPECT_NE(error_of(c, 4, one_stage(4))
                .find("recompute.layers[0].method: not allowed in a layer override"),
            std::string::npos);
  c.layers[0] = {0, 1, {model::RecomputeMode::full, {}, 3, {}}};
  EXPECT_NE(error_of(c, 4, one_stage(4))
                .find("recompute.layers[0].num_layers: 3 > 2 layers in the range"),
            std::string::npos);
}

TEST(RecomputeValidate, RejectsUnknownAndDuplicateStages) {
  RecomputeConfig c;
  c.stages.push_back({2, {model::RecomputeMode::none, {}, {}, {}}});
  EXPECT_NE(error_of(c, 4, {{{0, 2}}, {{2, 2}}})
                .find("recompute.stages[0].stage: 2 is not a pipeline stage"),
            std::string::npos);
  c.stages = {StageOverride{1, {}}, StageOverride{1, {}}};
  EXPECT_NE(error_of(c, 4, {{{0, 2}}, {{2, 2}}})
                .find("recompute.stages[1].stage: stage 1 has two overrides"),
            std::string::npos);
}

}  // namespace
