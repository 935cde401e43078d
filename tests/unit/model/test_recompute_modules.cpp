// The selective recompute table (model/recompute_modules.h) against what the modules mean:
// each drops exactly its tensors, the layer's rebuild restores them bit for bit, and a rerun
// costs the matmuls of the pieces it runs, each once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>

#include "model/layer.h"
#include "model/recompute_modules.h"
#include "model_test_util.h"

namespace {

using model::LayerRecompute;
using model::LayerStash;
using model::RecomputeMode;
using model::SelectiveModules;
using runtime::MemoryCategory;
using runtime::Tensor;

LayerRecompute selective(SelectiveModules modules) {
  return {RecomputeMode::selective, modules};
}

const LayerRecompute kAllFour =
    selective({.core_attn = true, .act = true, .layernorm = true, .mlp = true});

LayerRecompute only(const model::SelectiveModuleRow& module) {
  SelectiveModules modules;
  modules.*module.flag = true;
  return selective(modules);
}

// What each module drops, as layer_recompute.h describes the modules (with attention dropout).
const std::map<std::string, std::set<std::string>>& expected_drops() {
  static const std::map<std::string, std::set<std::string>> drops = {
      {"core_attn", {"probs", "attn_mask", "probs_drop"}},
      {"act", {"gelu_out"}},
      {"layernorm", {"ln1_out", "ln2_out"}},
      {"mlp", {"fc1_out", "gelu_out"}},
  };
  return drops;
}

std::set<std::string> dropped_names(const model::LayerDims& dims, const LayerRecompute& entry) {
  std::set<std::string> names;
  for (const auto& s : model::layer_stash_spec(dims, entry))
    if (!s.kept) names.insert(s.name);
  return names;
}

model::GptConfig tiny_config(float dropout, model::AttentionBackend attention) {
  model::GptConfig config = testing_support::tiny_config(dropout);
  config.attention_backend = attention;
  return config;
}

model::LayerDims tiny_dims(float dropout,
                           model::AttentionBackend attention = model::AttentionBackend::unfused) {
  return model::layer_dims(tiny_config(dropout, attention), /*micro_batch=*/2, true);
}

TEST(RecomputeModules, TableNamesTheFourModules) {
  std::set<std::string> names;
  for (const model::SelectiveModuleRow& module : model::selective_module_table()) {
    names.insert(module.name);
    EXPECT_EQ(model::to_string(only(module)), "selective{" + std::string(module.name) + "}");
  }
  EXPECT_EQ(names, (std::set<std::string>{"core_attn", "act", "layernorm", "mlp"}));
  for (size_t i = 0; i < model::forward_piece_table().size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(model::forward_piece_table()[i].piece), i);
  }
}

TEST(RecomputeModules, EachDropsExactlyItsTensors) {
  const model::LayerDims dims = tiny_dims(0.1f);
  EXPECT_TRUE(dropped_names(dims, {}).empty()) << "none keeps everything";
  EXPECT_EQ(model::stash_kept_bytes(model::layer_stash_spec(dims, {RecomputeMode::full, {}})), 0);
  std::set<std::string> all;
  for (const model::SelectiveModuleRow& module : model::selective_module_table()) {
    SCOPED_TRACE(module.name);
    const std::set<std::string>& expected = expected_drops().at(module.name);
    EXPECT_EQ(dropped_names(dims, only(module)), expected);
    all.insert(expected.begin(), expected.end());
  }
  EXPECT_EQ(dropped_names(dims, kAllFour), all);
  // Without attention dropout there is no mask and no dropped-out copy to drop.
  EXPECT_EQ(dropped_names(tiny_dims(0.f), selective({.core_attn = true})),
            (std::set<std::string>{"probs"}));
}

// Under flash, core_attn drops the attention output (proj's input) and its row log-sum-exp, and
// the rerun is the whole flash forward: both attention products. The other modules are the same.
TEST(RecomputeModules, FlashCoreAttnDropsItsOutputAndReruns) {
  const model::LayerDims dims = tiny_dims(0.1f, model::AttentionBackend::flash);
  EXPECT_EQ(dropped_names(dims, selective({.core_attn = true})),
            (std::set<std::string>{"ctx", "lse"}));
  EXPECT_TRUE(dropped_names(dims, {}).empty());
  for (const char* module : {"act", "layernorm", "mlp"}) {
    EXPECT_EQ(dropped_names(dims, only(*std::find_if(model::selective_module_table().begin(),
                                                     model::selective_module_table().end(),
                                                     [&](const auto& row) {
                                                       return row.name == std::string(module);
                                                     }))),
              expected_drops().at(module))
        << module;
  }
  const model::LayerFlops f = model::layer_forward_flops(dims);
  EXPECT_EQ(model::selective_recompute_flops(dims, selective({.core_attn = true})),
            f.scores + f.context);
  EXPECT_EQ(model::rebuild_input_gathers(kAllFour, {.attention = model::AttentionBackend::flash}),
            1);
}

TEST(RecomputeModules, FlopsAreTheRerunMatmulsEachOnce) {
  const model::LayerDims d = tiny_dims(0.1f);
  const int64_t scores = 2 * d.micro_batch * d.heads * d.seq * d.seq * d.head_dim;  // q k^T
  const int64_t fc1 = 2 * d.seq * d.micro_batch * d.hidden * d.ffn;
  const std::map<std::string, int64_t> expected = {
      {"core_attn", scores}, {"act", 0}, {"layernorm", 0}, {"mlp", fc1}};
  for (const model::SelectiveModuleRow& module : model::selective_module_table()) {
    EXPECT_EQ(model::selective_recompute_flops(d, only(module)), expected.at(module.name))
        << module.name;
  }
  EXPECT_EQ(model::selective_recompute_flops(d, selective({.act = true, .mlp = true})), fc1);
  EXPECT_EQ(model::selective_recompute_flops(d, kAllFour), scores + fc1);
  EXPECT_EQ(model::selective_recompute_flops(d, {}), 0);
  EXPECT_EQ(model::selective_recompute_flops(d, {RecomputeMode::full, {}}), 0);
}

TEST(RecomputeModules, OnlyTheFc1RebuildGathersItsInput) {
  for (const model::SelectiveModuleRow& module : model::selective_module_table()) {
    EXPECT_EQ(
        model::rebuild_input_gathers(only(module), {.attention = model::AttentionBackend::unfused}),
        std::string(module.name) == "mlp" ? 1 : 0)
        << module.name;
  }
  EXPECT_EQ(model::rebuild_input_gathers(kAllFour, {.attention = model::AttentionBackend::unfused}),
            1);
  EXPECT_EQ(model::rebuild_input_gathers({}, {.attention = model::AttentionBackend::unfused}), 0);
  EXPECT_EQ(model::rebuild_input_gathers({RecomputeMode::full, {}},
                                         {.attention = model::AttentionBackend::unfused}),
            0);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

// Forward under `none` and under `entry`, then the rebuild: every stash tensor equals the
// kept one bit for bit, and the rebuild allocated exactly the dropped bytes as activation.
void expect_rebuild_restores(const LayerRecompute& entry,
                             model::AttentionBackend attention = model::AttentionBackend::unfused) {
  SCOPED_TRACE(model::to_string(entry));
  testing_support::TinyModel m(tiny_config(0.1f, attention));
  const model::LayerDims dims = model::layer_dims(m.config, m.micro_batch, true);
  const model::LayerParams& weights = m.params.layers[1];
  const model::LayerContext context{.layer = 1, .seed = 1234, .step = 3, .sample_offset = 2};
  auto hidden = [&] {
    return Tensor::empty(m.allocator, {dims.seq, dims.micro_batch, dims.hidden},
                         runtime::DType::f32, MemoryCategory::activation);
  };
  Tensor input = hidden();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t i = 0; i < input.numel(); ++i) input.f32()[i] = normal(rng);

  LayerStash kept, dropped;
  const Tensor kept_out = hidden(), dropped_out = hidden();
  model::layer_forward(kept_out, kept, input, weights, dims, {}, {}, context, m.allocator);
  model::layer_forward(dropped_out, dropped, input, weights, dims, {}, entry, context, m.allocator);
  EXPECT_TRUE(same_bytes(kept_out, dropped_out));
  const auto spec = model::layer_stash_spec(dims, entry);
  for (const auto& s : spec) EXPECT_EQ((dropped.*s.member).defined(), s.kept) << s.name;

  const int64_t before = m.allocator.stats()[MemoryCategory::activation].current;
  model::layer_rebuild(dropped, weights, dims, {}, entry, context, m.allocator);
  EXPECT_EQ(m.allocator.stats()[MemoryCategory::activation].current - before,
            model::stash_dropped_bytes(spec));
  for (const auto& s : spec) EXPECT_TRUE(same_bytes(dropped.*s.member, kept.*s.member)) << s.name;
}

TEST(RecomputeModules, RebuildRestoresWhatEachModuleDrops) {
  for (const model::SelectiveModuleRow& module : model::selective_module_table()) {
    expect_rebuild_restores(only(module));
  }
  expect_rebuild_restores(kAllFour);
  expect_rebuild_restores(selective({.core_attn = true}), model::AttentionBackend::flash);
  expect_rebuild_restores(kAllFour, model::AttentionBackend::flash);
}

}  // namespace
