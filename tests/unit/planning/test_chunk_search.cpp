// The planner's chunk search against brute force: over every plan of a few layers (each layer
// none, any selective module subset, or in a full group of any size), the search's Pareto front of
// (forward end, backward peak, recompute FLOPs) is exactly the front of all plans, and each
// front plan's bytes equal the memory model's.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <tuple>

#include "model/embedding_head.h"
#include "model/flops.h"
#include "recompute/memory_model.h"
#include "trainer/planning/chunk_search.h"

namespace trainer {
namespace {

using model::LayerRecompute;
using model::RecomputeMode;
// Forward end, backward peak, recompute cost (FLOPs, then bytes rebuilt).
using Cost = std::tuple<int64_t, int64_t, RecomputeCost>;

model::GptConfig small_model() {
  model::GptConfig c;
  c.num_layers = 4;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.seq_length = 32;
  c.vocab_size = 128;
  return c;
}

RecomputeCost plan_cost(const model::LayerDims& dims,
                                   const recompute::RecomputePlan& plan) {
  RecomputeCost cost;
  for (int64_t i = 0; i < plan.num_layers(); ++i) {
    const LayerRecompute& entry = plan.layers[static_cast<size_t>(i)];
    if (plan.is_full(i)) {
      cost.price += model::layer_forward_flops(dims).total();
      cost.bytes += model::stash_kept_bytes(model::layer_stash_spec(dims, {}));
    } else {
      cost.price += model::selective_recompute_flops(dims, entry);
      cost.bytes += model::stash_dropped_bytes(model::layer_stash_spec(dims, entry));
    }
  }
  return cost;
}

// Every plan of `layers` layers: entries per layer, full groups of any size.
void every_plan(int64_t layers, const std::vector<LayerRecompute>& entries,
                const std::function<void(const recompute::RecomputePlan&)>& visit) {
  recompute::RecomputePlan plan = recompute::RecomputePlan::uniform(layers, {});
  std::function<void(int64_t, int64_t)> from = [&](int64_t k, int64_t next_group) {
    if (k == layers) return visit(plan);
    for (const LayerRecompute& e : entries) {
      plan.layers[static_cast<size_t>(k)] = e;
      plan.group[static_cast<size_t>(k)] = -1;
      from(k + 1, next_group);
    }
    for (int64_t g = 1; k + g <= layers; ++g) {
      for (int64_t i = k; i < k + g; ++i) {
        plan.layers[static_cast<size_t>(i)] = {RecomputeMode::full, {}};
        plan.group[static_cast<size_t>(i)] = next_group;
      }
      from(k + g, next_group + 1);
    }
  };
  from(0, 0);
}

// The costs no other beats: sorted by recompute cost, each kept unless an earlier kept one
// (no dearer) is no larger in both byte counts.
std::set<Cost> pareto(std::vector<Cost> all) {
  std::sort(all.begin(), all.end(), [](const Cost& a, const Cost& b) {
    return std::tie(std::get<2>(a), std::get<0>(a), std::get<1>(a)) <
           std::tie(std::get<2>(b), std::get<0>(b), std::get<1>(b));
  });
  std::vector<Cost> front;
  for (const Cost& a : all) {
    const bool beaten = std::any_of(front.begin(), front.end(), [&](const Cost& b) {
      return std::get<0>(b) <= std::get<0>(a) && std::get<1>(b) <= std::get<1>(a);
    });
    if (!beaten) front.push_back(a);
  }
  return {front.begin(), front.end()};
}

struct Shape {
  const char* name;
  model::AttentionBackend attention;
  float dropout;
  bool embedding, head;
  int64_t layers;
};

class PlannerSearch : public ::testing::TestWithParam<Shape> {};

TEST_P(PlannerSearch, FrontEqualsBruteForce) {
  const Shape shape = GetParam();
  model::GptConfig config = small_model();
  config.hidden_dropout = config.attention_dropout = shape.dropout;
  config.attention_backend = shape.attention;
  const model::LayerDims dims = model::layer_dims(config, 2, true);
  std::vector<LayerRecompute> entries(1);  // none, then every selective module subset
  for (int mask = 1; mask < 16; ++mask) {
    entries.push_back({RecomputeMode::selective,
                       {.core_attn = (mask & 1) != 0,
                        .act = (mask & 2) != 0,
                        .layernorm = (mask & 4) != 0,
                        .mlp = (mask & 8) != 0}});
  }
  std::vector<Cost> all;
  every_plan(shape.layers, entries, [&](const recompute::RecomputePlan& plan) {
    const auto m =
        recompute::predict_activation_memory(config, dims, plan, 1, shape.embedding, shape.head);
    all.emplace_back(m.forward_end, m.backward_peak, plan_cost(dims, plan));
  });
  ChunkSearch search;
  search.num_layers = shape.layers;
  search.has_embedding = shape.embedding;
  search.has_head = shape.head;
  const auto front = search_chunk_plans(config, dims, search);
  std::set<Cost> searched;
  for (const ChunkCandidate& c : front) {
    const auto m =
        recompute::predict_activation_memory(config, dims, c.plan, 1, shape.embedding, shape.head);
    EXPECT_EQ(m.forward_end, c.forward_end) << model::to_string(c.plan.layers[0]);
    EXPECT_EQ(m.backward_peak, c.backward_peak);
    EXPECT_TRUE(plan_cost(dims, c.plan) == c.cost);
    searched.emplace(c.forward_end, c.backward_peak, c.cost);
  }
  EXPECT_EQ(searched, pareto(all)) << shape.name << ": " << all.size() << " plans";
  EXPECT_EQ(searched.size(), front.size()) << "one plan per front point";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PlannerSearch,
    ::testing::Values(Shape{"unfused_dropout", model::AttentionBackend::unfused, 0.1f, true, true,
                            4},
                      Shape{"unfused", model::AttentionBackend::unfused, 0.f, false, true, 4},
                      Shape{"flash_dropout", model::AttentionBackend::flash, 0.1f, true, false, 4},
                      Shape{"flash_middle", model::AttentionBackend::flash, 0.f, false, false, 3}),
    [](const auto& test) { return std::string(test.param.name); });

// The candidate entries: none first, and no entry another beats.
TEST(PlannerSearch, CandidateEntriesStartWithNone) {
  model::GptConfig config = small_model();
  config.hidden_dropout = config.attention_dropout = 0.1f;
  const auto entries = candidate_entries(model::layer_dims(config, 2, true));
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries[0].mode, RecomputeMode::none);
  EXPECT_GT(entries.size(), 2u);
}

}  // namespace
}  // namespace trainer
