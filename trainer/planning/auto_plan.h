// recompute.auto: the plan with the least recompute cost (predicted seconds or matmul FLOPs,
// then bytes rebuilt) whose predicted memory fits train.memory_budget_gib on every rank. Per
// pipeline stage: the non-activation categories come from meta replays (rank_memory.h), the
// activation category from the exact chunk search (chunk_search.h) combined over the stage's
// chunks with the schedule's microbatches in flight; the chosen plan is checked by a replay of
// its own. Planning's map: docs/planning.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "recompute/recompute_config.h"
#include "trainer/config/config.h"
#include "trainer/planning/rank_memory.h"
#include "trainer/planning/stage_choice.h"
#include "trainer/planning/step_time.h"

namespace trainer {

struct AutoPlan {
  // The chosen plan as an ordinary section (per-layer overrides, auto off).
  recompute::RecomputeConfig recompute;
  std::vector<RankMemory> stage_memory;  // predicted, per pipeline stage
  // Per stage: whether its chunks' combination is the cheapest that fits (stage_choice.h).
  std::vector<ChoiceProof> stage_proof;
  double search_seconds = 0;
};

inline int64_t budget_bytes(double gib) {
  return static_cast<int64_t>(gib * static_cast<double>(int64_t{1} << 30));
}

// What the plan minimises: with a cost model, the predicted seconds of recompute (rebuilds and
// their communication, step_time.h); without one, matmul FLOPs (train.plan_objective flops).
// Ties go to fewer bytes rebuilt.
struct PlanPricing {
  const CostModel* costs = nullptr;
  LinkBandwidths links;
};

// The cost model train.plan_objective asks for: CostModel::for_config for time, none for flops.
std::optional<CostModel> objective_costs(const Config& config);

// Plans `config` (whatever its recompute section says) under `budget` bytes per rank. Throws
// runtime::ConfigError naming train.memory_budget_gib when no plan fits, with by how much and
// the largest consumer.
AutoPlan plan_under_budget(const Config& config, int64_t budget, const PlanPricing& pricing);

// `config` with recompute.auto replaced by its plan (unchanged without auto); the plan's
// AutoPlan::stage_proof into `stage_proof` when given.
Config with_auto_plan(const Config& config, const PlanPricing& pricing,
                      std::vector<ChoiceProof>* stage_proof = nullptr);

// A plan's predictions over the whole job: each stage's memory (every rank of a stage holds the
// same), the largest total, and the recompute FLOPs as a share of the model FLOPs of a step.
struct PlanSummary {
  std::vector<RankMemory> stage_memory;
  int64_t peak = 0;  // the largest RankMemory::total() of any rank
  double recompute_share = 0;
};
PlanSummary summarize_plan(const Config& config);

// The world rank that stands for pipeline stage `stage` (tensor and data rank 0): every rank of
// a stage holds the same memory.
int64_t stage_rank(const parallel::ParallelConfig& parallel, int64_t stage);

}  // namespace trainer
