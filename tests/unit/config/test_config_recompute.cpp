// The `recompute:` section: YAML -> RecomputeConfig (Megatron names), its
// rejection messages through parse_config, to_yaml round trip, and resolution.
#include <gtest/gtest.h>

#include "config_test_util.h"

namespace trainer {
namespace {

using config_test::parse_rejected;

const std::vector<std::string> kWithData = {"data.path=data/corpus"};

const char* kModel = "model: {num_layers: 12}\n";

TEST(ConfigRecompute, ParsesPresetAndOverrides) {
  const Config c =
      parse_config(std::string(kModel) +
                       "recompute:\n"
                       "  granularity: full\n"
                       "  method: uniform\n"
                       "  num_layers: 2\n"
                       "  layers:\n"
                       "    - {range: [0, 3], granularity: full}\n"
                       "    - {range: [4, 11], granularity: selective, modules: [core_attn, act]}\n"
                       "  stages:\n"
                       "    - {stage: 0, granularity: full, method: block, num_layers: 4}\n",
                   "test.yaml", kWithData);
  EXPECT_EQ(c.recompute.preset.granularity, model::RecomputeMode::full);
  EXPECT_EQ(c.recompute.preset.method, recompute::Method::uniform);
  EXPECT_EQ(c.recompute.preset.num_layers, 2);
  ASSERT_EQ(c.recompute.layers.size(), 2u);
  EXPECT_EQ(c.recompute.layers[1].first, 4);
  EXPECT_EQ(c.recompute.layers[1].last, 11);
  EXPECT_EQ(c.recompute.layers[1].preset.modules,
            (model::SelectiveModules{.core_attn = true, .act = true}));
  ASSERT_EQ(c.recompute.stages.size(), 1u);
  EXPECT_EQ(c.recompute.stages[0].preset.method, recompute::Method::block);
  const recompute::RecomputePlan plan = recompute::resolve_plan(c.recompute, 0, {{0, 12}});
  EXPECT_EQ(plan.layers[0].mode, model::RecomputeMode::full);
  EXPECT_EQ(plan.layers[4].mode, model::RecomputeMode::selective);
}

TEST(ConfigRecompute, RoundTripsThroughToYaml) {
  const Config c =
      parse_config(std::string(kModel) +
                       "recompute: {granularity: selective, modules: [layernorm, mlp],"
                       " layers: [{range: [2, 5], granularity: full, num_layers: 2}]}\n",
                   "test.yaml", kWithData);
  const Config again = parse_config(to_yaml(c), "round-trip.yaml");
  EXPECT_EQ(again.recompute.preset.modules, c.recompute.preset.modules);
  ASSERT_EQ(again.recompute.layers.size(), 1u);
  EXPECT_EQ(again.recompute.layers[0].first, 2);
  EXPECT_EQ(again.recompute.layers[0].last, 5);
  EXPECT_EQ(again.recompute.layers[0].preset.num_layers, 2);
  EXPECT_FALSE(again.recompute.preset.method.has_value());
}

TEST(ConfigRecompute, RejectsUnknownModuleAndDuplicates) {
  EXPECT_TRUE(parse_rejected("recompute: {granularity: selective, modules: [core_attn, attn]}\n",
                             kWithData, "recompute.modules[1]",
                             {"unknown module 'attn'", "core_attn, act, layernorm, mlp"}));
  EXPECT_TRUE(parse_rejected("recompute: {granularity: selective, modules: [act, act]}\n",
                             kWithData, "recompute.modules[1]", {"'act' listed twice"}));
}

TEST(ConfigRecompute, RejectsUnknownGranularityAndMethod) {
  EXPECT_TRUE(parse_rejected("recompute: {granularity: partial}\n", kWithData,
                             "recompute.granularity", {"none, full, selective", "'partial'"}));
  EXPECT_TRUE(parse_rejected("recompute: {granularity: full, method: blocks}\n", kWithData,
                             "recompute.method", {"uniform, block", "'blocks'"}));
}

TEST(ConfigRecompute, RejectsMegatronInvalidCombinations) {
  EXPECT_TRUE(parse_rejected("recompute: {granularity: selective, method: uniform}\n", kWithData,
                             "recompute.method", {"not allowed with granularity selective"}));
  EXPECT_TRUE(parse_rejected("recompute: {granularity: full}\n", kWithData, "recompute.method",
                             {"required with granularity full"}));
  EXPECT_TRUE(parse_rejected(
      std::string(kModel) + "recompute: {granularity: full, method: block, num_layers: 13}\n",
      kWithData, "recompute.num_layers", {"13 > 12 layers"}));
}

TEST(ConfigRecompute, NumLayersIsCheckedPerPipelineStage) {
  // 12 layers on 4 stages: 3 per stage, so block 4 does not fit.
  EXPECT_TRUE(parse_rejected(
      std::string(kModel) + "parallel: {pipeline: 4}\n"
                            "recompute: {granularity: full, method: block, num_layers: 4}\n",
      kWithData, "recompute.num_layers", {"4 > 3 layers", "pipeline stage 0"}));
}

TEST(ConfigRecompute, RejectsBadRangesAndStages) {
  EXPECT_TRUE(parse_rejected("model: {num_layers: 24}\nrecompute: {layers: [{range: [20, 40]}]}\n",
                             kWithData, "recompute.layers[0].range", {"last 40 >= num_layers 24"}));
  EXPECT_TRUE(parse_rejected("recompute: {layers: [{range: [1, 2, 3]}]}\n", kWithData,
                             "recompute.layers[0].range", {"expected [first, last]"}));
  EXPECT_TRUE(parse_rejected("recompute: {layers: [{range: [0, 1]}, {range: [1, 1]}]}\n", kWithData,
                             "recompute.layers[1].range",
                             {"overlaps recompute.layers[0].range [0, 1]"}));
  EXPECT_TRUE(parse_rejected("recompute: {stages: [{stage: 1}]}\n", kWithData,
                             "recompute.stages[0].stage", {"1 is not a pipeline stage"}));
  EXPECT_TRUE(parse_rejected(
      "recompute: {layers: [{range: [0, 1], granularity: none, modules: [act]}]}\n", kWithData,
      "recompute.layers[0].modules", {"not allowed with granularity none"}));
  EXPECT_TRUE(parse_rejected("recompute: {layers: [{range: [0, 1], frist: 2}]}\n", kWithData,
                             "recompute.layers[0].frist", {"unknown key", "range, granularity"}));
}

TEST(ConfigRecompute, OverrideFromCommandLine) {
  const Config c =
      parse_config(kModel, "test.yaml",
                   {"data.path=d", "recompute.granularity=selective", "recompute.modules=[mlp]"});
  EXPECT_EQ(c.recompute.preset.modules, (model::SelectiveModules{.mlp = true}));
}

}  // namespace
}  // namespace trainer

namespace trainer {
namespace {

TEST(ConfigParallel, InterleavingNeedsMicrobatchesDivisibleByStages) {
  EXPECT_TRUE(config_test::parse_rejected(
      "model: {num_layers: 8}\n"
      "train: {micro_batch_size: 8, global_batch_size: 16}\n"
      "parallel: {pipeline: 2, virtual_pipeline: 2, data: 2}\n",
      {"data.path=d"}, "parallel.virtual_pipeline",
      {"microbatches per step", "= 1)", "divisible by parallel.pipeline 2"}));
}

}  // namespace
}  // namespace trainer
