// The layout search against brute force: on a small model over 4 ranks, every reported layout
// multiplies to the ranks and validates, the table is sorted, and its rows are the best of
// planning every valid layout (so the bound and the shortcuts lose nothing); --emit-yaml loads
// as the best layout's config; a profile prices the layouts with its shapes; bad flags and
// budgets give errors naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "trainer/commands/plan_command.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/planning/layout_search.h"
#include "trainer/planning/time_profile.h"

namespace trainer {
namespace {

constexpr int64_t kRanks = 4;

// tiny.yaml's shape with 8 layers (so pp 2 can interleave 2 and 4 deep) and flash attention
// (so context parallelism is valid).
const char* kConfig = R"(
model:
  num_layers: 8
  hidden_size: 64
  num_attention_heads: 4
  seq_length: 64
  vocab_size: 128
  attention_backend: flash
train:
  micro_batch_size: 8
  global_batch_size: 8
data:
  path: data/synthetic
output:
  dir: runs/test_layout_search
)";

// Stated rates, so that predictions do not depend on this machine's speed.
CostModel fixed_costs() {
  return CostModel({.gemm_gflops = 50, .copy_gbps = 10, .source = "stated for the test"},
                   std::nullopt, "");
}

struct Fixture {
  Config base = parse_config(kConfig, "test");
  CostModel costs = fixed_costs();
  SearchRequest request(double budget_gib, size_t top) const {
    return {.ranks = kRanks,
            .budget = budget_bytes(budget_gib),
            .costs = &costs,
            .shape_costs = {},
            .links = default_links(base),
            .top = top};
  }
};

// About 5 MiB per rank: some layouts fit without recompute, some only with it, some not at all,
// and the bound cuts most (checked below).
constexpr double kBudgetGib = 0.005;

struct BruteRow {
  Layout layout;
  double step_s = 0;
  int64_t peak = 0;
};

// Every valid layout planned by the budget planner.
std::vector<BruteRow> brute_force(const Fixture& f, int64_t budget) {
  std::vector<BruteRow> rows;
  for (const Layout& layout : enumerate_layouts(f.base, kRanks)) {
    Config config;
    try {
      config = layout_config(f.base, layout, kRanks);
    } catch (const runtime::ConfigError&) {
      continue;
    }
    try {
      config.recompute =
          plan_under_budget(config, budget, {&f.costs, default_links(config)}).recompute;
    } catch (const runtime::ConfigError&) {
      continue;
    }
    rows.push_back({layout, predict_step_time(config, f.costs, default_links(config)).step_s,
                    summarize_plan(config).peak});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const BruteRow& a, const BruteRow& b) {
    return a.step_s != b.step_s ? a.step_s < b.step_s : a.peak < b.peak;
  });
  return rows;
}

TEST(LayoutSearch, EnumeratesEveryFactorisation) {
  const Fixture f;
  const std::vector<Layout> layouts = enumerate_layouts(f.base, kRanks);
  for (const Layout& l : layouts) {
    EXPECT_EQ(l.tensor * l.context * l.pipeline * l.data, kRanks);
    EXPECT_FALSE(l.tensor == 1 && l.sequence_parallel);
    EXPECT_FALSE(l.data * l.context == 1 && l.distributed_optimizer);
  }
  // tp 2 cp 1 pp 2 dp 1, interleaved 2, sequence parallel, micro batch 4: present.
  const Layout wanted{.tensor = 2,
                      .pipeline = 2,
                      .virtual_pipeline = 2,
                      .data = 1,
                      .sequence_parallel = true,
                      .micro_batch = 4};
  EXPECT_NE(std::find(layouts.begin(), layouts.end(), wanted), layouts.end());
}

// Both ways of exposing the data-parallel reduction (Note [Search bound] in layout_search.cpp).
class LayoutSearchOverlap : public ::testing::TestWithParam<bool> {};

TEST_P(LayoutSearchOverlap, MatchesBruteForce) {
  Fixture f;
  f.base.optimizer.overlap_grad_reduce = GetParam();
  const SearchRequest request = f.request(kBudgetGib, 8);
  const SearchResult result = search_layouts(f.base, request);
  const std::vector<BruteRow> brute = brute_force(f, request.budget);
  ASSERT_GE(brute.size(), request.top);
  ASSERT_EQ(result.best.size(), request.top);
  // The budget makes the shortcuts and the bound all take part.
  EXPECT_GT(result.without_recompute, 0);
  EXPECT_GT(result.planned, 0);
  EXPECT_GT(result.cut_by_bound, 0);
  EXPECT_GT(result.valid, result.fit);
  for (size_t i = 0; i < result.best.size(); ++i) {
    const LayoutResult& r = result.best[i];
    const Layout& l = r.layout;
    SCOPED_TRACE(i);
    EXPECT_EQ(l.tensor * l.context * l.pipeline * l.data, kRanks);
    EXPECT_NO_THROW(validate_config(r.config, ConfigUse::plan));
    EXPECT_NO_THROW(validate_launch(r.config, kRanks));
    EXPECT_EQ(r.config.parallel.virtual_pipeline, l.virtual_pipeline);
    EXPECT_EQ(r.config.train.micro_batch_size, l.micro_batch);
    EXPECT_LE(r.peak_bytes, request.budget);
    EXPECT_EQ(r.peak_bytes, summarize_plan(r.config).peak);
    EXPECT_LE(r.bound_s, r.prediction.step_s * (1 + 1e-9));
    if (i > 0) {
      const LayoutResult& prev = result.best[i - 1];
      EXPECT_TRUE(
          prev.prediction.step_s < r.prediction.step_s ||
          (prev.prediction.step_s == r.prediction.step_s && prev.peak_bytes <= r.peak_bytes));
    }
    // The same times and memory as the brute force's i-th row.
    EXPECT_DOUBLE_EQ(r.prediction.step_s, brute[i].step_s);
    EXPECT_EQ(r.peak_bytes, brute[i].peak);
  }
  EXPECT_EQ(result.best[0].layout, brute[0].layout);
}

INSTANTIATE_TEST_SUITE_P(LayoutSearch, LayoutSearchOverlap, ::testing::Bool());

TEST(LayoutSearch, EmitYamlLoadsAsTheBestLayout) {
  const Fixture f;
  const SearchResult result = search_layouts(f.base, f.request(kBudgetGib, 3));
  const std::string path =
      (std::filesystem::temp_directory_path() / "test_layout_search_best.yaml").string();
  std::ofstream(path) << best_layout_yaml(result);
  const Config loaded = load_config(path);
  std::filesystem::remove(path);
  const Config& best = result.best[0].config;
  EXPECT_EQ(loaded.parallel, best.parallel);
  EXPECT_EQ(loaded.train.micro_batch_size, best.train.micro_batch_size);
  EXPECT_EQ(loaded.train.global_batch_size, f.base.train.global_batch_size);
  EXPECT_EQ(loaded.optimizer.distributed, best.optimizer.distributed);
  EXPECT_EQ(loaded.recompute.layers.size(), best.recompute.layers.size());
  EXPECT_NO_THROW(validate_launch(loaded, kRanks));
  // The loaded config predicts what the search reported.
  EXPECT_EQ(summarize_plan(loaded).peak, result.best[0].peak_bytes);
  EXPECT_DOUBLE_EQ(predict_step_time(loaded, f.costs, default_links(loaded)).step_s,
                   result.best[0].prediction.step_s);
}

// A profile prices the layouts with its rank shapes (and names itself in their configs); the
// others keep the default cost model. Here: a profile of tp 2 with sequence parallelism and
// micro batch 1 whose layers are 100x the roofline's, so that those layouts fall to the bottom.
TEST(LayoutSearch, AProfilePricesTheLayoutsWithItsShapes) {
  const Fixture f;
  SearchRequest request = f.request(1.0, 200);
  const Config shape = layout_config(
      f.base, {.tensor = 2, .data = 2, .sequence_parallel = true, .micro_batch = 1}, kRanks);
  const StageSetup setup = make_stage_setup(shape, 0, 0);
  const RankTimes roofline = f.costs.times(shape, setup);
  TimeProfile profile;
  profile.device = "test";
  profile.dtype = "f32";
  profile.shapes = profile_shape_key(shape, setup);
  profile.gemm_gflops = 50;
  profile.copy_gbps = 10;
  profile.layer_forward_s = 100 * roofline.layer_forward_s;
  profile.layer_backward_s = 100 * roofline.layer_backward_s;
  profile.embedding_head_forward_s = profile.embedding_head_backward_s = 1e-3;
  request.shape_costs.push_back({"slow.json", CostModel({}, profile, "slow.json")});
  const SearchResult result = search_layouts(f.base, request);
  int profiled = 0;
  for (size_t i = 0; i < result.best.size(); ++i) {
    const LayoutResult& r = result.best[i];
    const bool has_shape = r.layout.tensor == 2 && r.layout.sequence_parallel &&
                           r.layout.micro_batch == 1 && r.layout.context == 1;
    SCOPED_TRACE(i);
    EXPECT_EQ(r.prediction.source.starts_with("the profile slow.json"), has_shape);
    EXPECT_EQ(r.config.train.time_profile, has_shape ? "slow.json" : "");
    if (has_shape) {
      ++profiled;
      EXPECT_GT(i, result.best.size() / 2);  // 100x slower layers: among the slowest
    }
  }
  EXPECT_GT(profiled, 0);
}

// `trainer plan ARGS` on kConfig; the error's message ("" when none).
// A profile of stated rates (no shapes of any layout: the roofline at its rates), which spares
// each command measuring this CPU's rates.
std::string plan_error(std::vector<std::string> args) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string path = dir + "/test_layout_search.yaml";
  const std::string profile_path = dir + "/test_layout_search_profile.json";
  std::ofstream(path) << kConfig;
  TimeProfile rates;
  rates.device = "stated for the test";
  rates.gemm_gflops = 50;
  rates.copy_gbps = 10;
  write_time_profile(rates, profile_path);
  args.insert(args.begin(), {"--config", path, "--profile", profile_path});
  std::ostringstream out;
  try {
    run_plan_command(args, out);
  } catch (const runtime::Error& error) {
    return error.what();
  }
  return "";
}

TEST(LayoutSearch, BadFlagsNameThemselves) {
  EXPECT_NE(plan_error({"--search", "--budget-gib", "1"}).find("--search needs --ranks"),
            std::string::npos);
  EXPECT_NE(plan_error({"--search", "--ranks", "4"}).find("--search needs --budget-gib"),
            std::string::npos);
  for (const char* bad : {"0", "-2", "four", "2.5", ""}) {
    EXPECT_NE(plan_error({"--search", "--ranks", bad, "--budget-gib", "1"})
                  .find(std::string("--ranks needs a positive integer, got '") + bad + "'"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(plan_error({"--ranks", "4"}).find("--ranks goes with --search"), std::string::npos);
  EXPECT_NE(plan_error({"--profile", "a.json", "--profile", "b.json"})
                .find("--profile more than once goes with --search"),
            std::string::npos);
  EXPECT_NE(plan_error({"--search", "--ranks", "4", "--budget-gib", "1", "--top", "0"})
                .find("--top needs a positive integer"),
            std::string::npos);
}

TEST(LayoutSearch, NoValidOrFittingLayoutIsAConfigError) {
  // 7 ranks: 4 heads, 8 layers and a global batch of 8 divide by none of 7's factors.
  const std::string none_valid = plan_error({"--search", "--ranks", "7", "--budget-gib", "1"});
  EXPECT_NE(none_valid.find("parallel: none of the"), std::string::npos) << none_valid;
  EXPECT_NE(none_valid.find("--ranks 7"), std::string::npos) << none_valid;
  const std::string none_fits = plan_error({"--search", "--ranks", "4", "--budget-gib", "0.0001"});
  EXPECT_NE(none_fits.find("train.memory_budget_gib: 0.0001 GiB (--budget-gib) fits none of the"),
            std::string::npos)
      << none_fits;
  // The search prints its table when all is well.
  EXPECT_EQ(plan_error({"--search", "--ranks", "4", "--budget-gib", "1", "--top", "2"}), "");
}

}  // namespace
}  // namespace trainer
