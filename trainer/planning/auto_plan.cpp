// The planner's stage-level choice. For each stage and each overhead threshold (the
// non-activation totals of replays under one entry everywhere): with the entries within it, each
// chunk's front, and the cheapest combination of fronts whose scheduled peak fits the budget less
// the threshold; the chosen plan is replayed, and the room shrinks by any excess until it fits.
// The cheapest plan over the thresholds wins.
#include "trainer/planning/auto_plan.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>

#include "parallel/pipeline/schedules.h"
#include "runtime/error.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/chunk_search.h"
#include "trainer/planning/stage_choice.h"
#include "trainer/planning/step_time.h"
#include "trainer/util/format_bytes.h"

namespace trainer {
namespace {

// `config` with every layer of the model under one entry (full: groups of one layer).
Config with_uniform_entry(const Config& config, const model::LayerRecompute& entry) {
  Config c = config;
  c.recompute = {};
  c.recompute.preset.granularity = entry.mode;
  if (entry.mode == model::RecomputeMode::full) {
    c.recompute.preset.method = recompute::Method::uniform;
    c.recompute.preset.num_layers = 1;
  } else if (entry.mode == model::RecomputeMode::selective) {
    c.recompute.preset.modules = entry.modules;
  }
  return c;
}

int64_t non_activation_bytes(const RankMemory& memory) {
  return memory.total() - memory[runtime::MemoryCategory::activation];
}

// A layer entry (full: groups of one) and the non-activation total of the stage's replay with
// every layer under it: what a plan using the entry must leave room for (workspace differs by
// entry: an unfused `none` layer's backward holds score-sized temporaries, `full` holds fewer).
struct EntryOverhead {
  model::LayerRecompute entry;
  int64_t bytes = 0;
};

std::vector<EntryOverhead> entry_overheads(const Config& config, int64_t stage,
                                           const model::LayerDims& dims,
                                           const RecomputePrices& prices) {
  std::vector<model::LayerRecompute> entries = candidate_entries(dims, prices);
  entries.push_back({model::RecomputeMode::full, {}});
  std::vector<EntryOverhead> overheads;
  for (const model::LayerRecompute& entry : entries) {
    const RankMemory memory =
        predict_rank_memory(with_uniform_entry(config, entry), stage_rank(config.parallel, stage));
    overheads.push_back({entry, non_activation_bytes(memory)});
  }
  return overheads;
}

// A chunk plan as layer overrides of global layers: runs of one entry as one range, each full
// group as one range with its size.
void add_overrides(const recompute::RecomputePlan& plan, int64_t first_layer,
                   std::vector<recompute::LayerOverride>& out) {
  for (int64_t i = 0; i < plan.num_layers();) {
    int64_t end = i + 1;
    const model::LayerRecompute& entry = plan.layers[static_cast<size_t>(i)];
    recompute::LayerOverride o;
    o.preset.granularity = entry.mode;
    if (plan.is_full(i)) {
      while (end < plan.num_layers() && plan.is_full(end) && plan.group_start(end) == i) ++end;
      o.preset.num_layers = end - i;
    } else {
      while (end < plan.num_layers() && plan.layers[static_cast<size_t>(end)] == entry) ++end;
      if (entry.mode == model::RecomputeMode::selective) o.preset.modules = entry.modules;
    }
    o.first = first_layer + i;
    o.last = first_layer + end - 1;
    if (entry.mode != model::RecomputeMode::none) out.push_back(o);
    i = end;
  }
}

// The error when not even the least-memory plan fits stage `stage`.
[[noreturn]] void throw_no_fit(const Config& config, int64_t stage, int64_t budget,
                               const RankMemory& memory) {
  runtime::MemoryCategory largest = runtime::MemoryCategory::param;
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories)
    if (memory[c] > memory[largest]) largest = c;
  throw runtime::ConfigError(
      "train.memory_budget_gib",
      TRAINER_STR(config.train.memory_budget_gib
                  << " GiB does not fit pipeline stage " << stage
                  << ": its least-memory plan predicts " << format_bytes(memory.total())
                  << " per rank, " << format_bytes(memory.total() - budget)
                  << " over; the largest consumer is " << runtime::category_name(largest) << " ("
                  << format_bytes(memory[largest]) << ")"));
}

// A stage's plan: its overrides, cost, and replayed memory.
struct StagePlan {
  std::vector<recompute::LayerOverride> overrides;
  RecomputeCost cost;
  int64_t total = 0;
  RankMemory memory;
  ChoiceProof proof = ChoiceProof::cheapest;  // of its chunks' combination
};

// The search of one stage. Plans are sought per overhead threshold: with only the entries whose
// overhead is at most the threshold, the activations get the budget less the threshold.
class StageSearch {
 public:
  StageSearch(const Config& config, int64_t stage, const PlanPricing& pricing)
      : config_(config),
        stage_(stage),
        setup_(make_stage_setup(config, stage, 0)),
        prices_(pricing.costs == nullptr
                    ? RecomputePrices{}
                    : stage_time_prices(config, setup_, *pricing.costs, pricing.links)),
        ranges_(parallel::stage_layer_chunks(config.parallel,
                                             config.model.num_layers)[static_cast<size_t>(stage)]),
        ops_(parallel::schedule_ops(setup_.schedule, config.parallel.pipeline, stage,
                                    static_cast<int64_t>(ranges_.size()), setup_.num_microbatches)),
        overheads_(entry_overheads(config, stage, setup_.dims, prices_)) {}

  // The distinct overheads, ascending.
  std::vector<int64_t> thresholds() const {
    std::vector<int64_t> values;
    for (const EntryOverhead& o : overheads_) values.push_back(o.bytes);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
  }

  // The cheapest plan of entries within `threshold` whose replay fits `budget`; the room shrinks
  // by any excess of a replay until one fits or none is left.
  std::optional<StagePlan> within(int64_t budget, int64_t threshold) const {
    for (int64_t room = budget - threshold; room >= 0;) {
      const std::vector<std::vector<ChunkCandidate>> chunk_fronts = fronts(threshold, room);
      if (chunk_fronts.empty()) return std::nullopt;
      const StageChoice choice = choose_stage_combination(chunk_fronts, ops_, room);
      if (!choice.fits) return std::nullopt;
      StagePlan plan = replay(choice);
      if (plan.total <= budget) return plan;
      room -= plan.total - budget;
    }
    return std::nullopt;
  }

  // The plan of the least activation peak with every entry allowed (for the error message).
  StagePlan least_memory() const {
    return replay(choose_stage_combination(fronts(-1, -1), ops_, -1));
  }

 private:
  // Each chunk's front with the entries within `threshold` (< 0: all), pruned at `room` bytes.
  std::vector<std::vector<ChunkCandidate>> fronts(int64_t threshold, int64_t room) const {
    ChunkSearch search;
    search.max_bytes = room;
    search.allow_full = false;
    search.prices = prices_;
    for (const EntryOverhead& o : overheads_) {
      if (threshold >= 0 && o.bytes > threshold) continue;
      if (o.entry.mode == model::RecomputeMode::full) {
        search.allow_full = true;
      } else {
        search.entries.push_back(o.entry);
      }
    }
    std::vector<std::vector<ChunkCandidate>> all;
    for (size_t v = 0; v < ranges_.size(); ++v) {
      search.num_layers = ranges_[v].count;
      search.has_embedding = setup_.chunks[v].spec.embedding;
      search.has_head = setup_.chunks[v].spec.head;
      if (search.entries.empty() && !search.allow_full) return {};
      all.push_back(search_chunk_plans(config_.model, setup_.dims, search));
    }
    return all;
  }

  StagePlan replay(const StageChoice& choice) const {
    StagePlan plan;
    plan.cost = choice.cost;
    plan.proof = choice.proof;
    for (size_t v = 0; v < ranges_.size(); ++v)
      add_overrides(choice.chunks[v]->plan, ranges_[v].first, plan.overrides);
    Config planned = config_;
    planned.recompute = {};
    planned.recompute.layers = plan.overrides;
    plan.memory = predict_rank_memory(planned, stage_rank(config_.parallel, stage_));
    plan.total = plan.memory.total();
    return plan;
  }

  const Config& config_;
  const int64_t stage_;
  const StageSetup setup_;
  const RecomputePrices prices_;
  const std::vector<parallel::LayerRange> ranges_;
  const std::vector<parallel::ScheduleOp> ops_;
  const std::vector<EntryOverhead> overheads_;
};

}  // namespace

int64_t stage_rank(const parallel::ParallelConfig& parallel, int64_t stage) {
  return parallel.tensor * parallel.context * parallel.data * stage;
}

AutoPlan plan_under_budget(const Config& config, int64_t budget, const PlanPricing& pricing) {
  const auto start = std::chrono::steady_clock::now();
  AutoPlan result;
  for (int64_t stage = 0; stage < config.parallel.pipeline; ++stage) {
    const StageSearch search(config, stage, pricing);
    std::optional<StagePlan> best;
    for (const int64_t threshold : search.thresholds()) {
      std::optional<StagePlan> plan = search.within(budget, threshold);
      if (plan && (!best || std::tie(plan->cost, plan->total) < std::tie(best->cost, best->total)))
        best = std::move(plan);
    }
    if (!best) {
      const StagePlan least = search.least_memory();
      throw_no_fit(config, stage, budget, least.memory);
    }
    result.recompute.layers.insert(result.recompute.layers.end(), best->overrides.begin(),
                                   best->overrides.end());
    result.stage_memory.push_back(best->memory);
    result.stage_proof.push_back(best->proof);
  }
  result.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

PlanSummary summarize_plan(const Config& config) {
  PlanSummary summary;
  int64_t recompute_flops = 0, model_flops = 0;
  for (int64_t stage = 0; stage < config.parallel.pipeline; ++stage) {
    const StageSetup setup = make_stage_setup(config, stage, 0);
    recompute_flops += setup.recompute_flops_per_step;
    model_flops += setup.model_flops_per_step;
    summary.stage_memory.push_back(predict_rank_memory(config, stage_rank(config.parallel, stage)));
    summary.peak = std::max(summary.peak, summary.stage_memory.back().total());
  }
  summary.recompute_share =
      model_flops > 0 ? static_cast<double>(recompute_flops) / static_cast<double>(model_flops)
                      : 0.0;
  return summary;
}

std::optional<CostModel> objective_costs(const Config& config) {
  if (config.train.plan_objective == PlanObjective::flops) return std::nullopt;
  return CostModel::for_config(config);
}

Config with_auto_plan(const Config& config, const PlanPricing& pricing,
                      std::vector<ChoiceProof>* stage_proof) {
  if (!config.recompute.automatic) return config;
  const AutoPlan plan =
      plan_under_budget(config, budget_bytes(config.train.memory_budget_gib), pricing);
  if (stage_proof != nullptr) *stage_proof = plan.stage_proof;
  Config planned = config;
  planned.recompute = plan.recompute;
  return planned;
}

}  // namespace trainer
