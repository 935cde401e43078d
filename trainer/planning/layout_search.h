// The layout search (`trainer plan --search`, docs/layout_search.md): every tensor x context x
// pipeline x data split of N ranks, with virtual pipeline, sequence parallelism, micro batch
// size and the distributed optimizer, that the config's own validation accepts; for each, the
// budget planner's recompute (auto_plan.h, priced by time) and the predicted step time
// (step_time.h). Exact and fast: layouts are planned in order of a lower bound on their step
// time (the prediction without recompute, less only what recompute could hide), and the search
// stops when the next bound exceeds the K-th best prediction found.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/planning/cost_model.h"
#include "trainer/planning/stage_choice.h"
#include "trainer/planning/step_time.h"

namespace trainer {

// One way to lay out the job; everything else (model, global batch, ...) is the config's.
struct Layout {
  int64_t tensor = 1;
  int64_t context = 1;
  int64_t pipeline = 1;
  int64_t virtual_pipeline = 1;
  int64_t data = 1;
  bool sequence_parallel = false;
  int64_t micro_batch = 1;
  bool distributed_optimizer = false;
  bool operator==(const Layout&) const = default;
};

// Every combination the search tries on `ranks` ranks, valid or not: tp x cp x pp x dp = ranks;
// vp 1 and, with pp > 1, each divisor of the layers per stage; sp only with tp > 1; the micro
// batch each divisor of the global batch per replica; the distributed optimizer only with more
// than one replica (data x context).
std::vector<Layout> enumerate_layouts(const Config& base, int64_t ranks);

// `base` laid out as `layout` with no recompute (the planner fills it in); throws
// runtime::ConfigError (validate_config, validate_launch) when the layout is invalid.
Config layout_config(const Config& base, const Layout& layout, int64_t ranks);

// One planned layout: the config with its recompute plan, and the predictions.
struct LayoutResult {
  Layout layout;
  Config config;  // laid out, recompute planned under the budget
  StepPrediction prediction;
  int64_t peak_bytes = 0;      // the largest predicted total of any rank
  double recompute_share = 0;  // recompute FLOPs over the model FLOPs of a step
  double bound_s = 0;          // the lower bound the search ordered it by
  // The least proven of its stages' chunk combinations (deep interleaving past the exact walk's
  // limit; stage_choice.h).
  ChoiceProof proof = ChoiceProof::cheapest;
};

struct SearchRequest {
  int64_t ranks = 0;
  int64_t budget = 0;                // bytes per rank
  const CostModel* costs = nullptr;  // the times of every layout no profile below matches
  // Profiles (repeated --profile), each pricing the layouts whose rank shapes it measured; such
  // a layout's config gets its path as train.time_profile.
  struct ShapeProfile {
    std::string path;
    CostModel costs;
  };
  std::vector<ShapeProfile> shape_costs;
  LinkBandwidths links;
  size_t top = 10;
};

struct SearchResult {
  std::vector<LayoutResult> best;  // at most `top`, by predicted step time, ties to less memory
  int64_t enumerated = 0;
  int64_t valid = 0;
  int64_t fit = 0;                // layouts that fit the budget: without recompute, or planned
  int64_t without_recompute = 0;  // of which fit without recompute (the planner is not run)
  int64_t planned = 0;            // layouts the budget planner ran on
  int64_t over_without_activations = 0;  // skipped: parameters and optimizer alone exceed
  int64_t cut_by_bound = 0;              // never looked at: their bound exceeds the K-th best
  double seconds = 0;
};

// Searches `base`'s layouts on request.ranks ranks. Throws runtime::ConfigError naming
// train.memory_budget_gib when no valid layout fits, and parallel when none is valid.
SearchResult search_layouts(const Config& base, const SearchRequest& request);

// The table of the best layouts, the counts, the search time, where the times came from, and
// what the prediction does not model.
void print_search(const SearchResult& result, const SearchRequest& request, std::ostream& out);

// The best layout as a complete config for `trainer train --config` (to_yaml of its config).
std::string best_layout_yaml(const SearchResult& result);

// `trainer plan --search` on `config` (its train.memory_budget_gib the budget): the table, or
// with emit_yaml the best layout's config. Returns the exit code.
struct SearchFlags {
  int64_t ranks = 0;                  // --ranks
  int64_t top = 10;                   // --top
  bool emit_yaml = false;             // --emit-yaml
  std::vector<std::string> profiles;  // every --profile; the first is train.time_profile
  const CostModel* costs = nullptr;   // CostModel::for_config(config)
  LinkBandwidths links;
};
int run_layout_search(const Config& config, const SearchFlags& flags, std::ostream& out);

}  // namespace trainer
