// The planner's stage-level choice. For each stage: the room the activations have (the budget
// less the least non-activation total of the candidate entries' replays), each chunk's front,
// the cheapest combination of fronts whose scheduled peak fits the room; then the chosen plan is
// replayed, and the room shrinks by any excess until it fits.
#include "trainer/auto_plan.h"

#include <algorithm>
#include <chrono>

#include "parallel/pipeline/schedules.h"
#include "recompute/planner.h"
#include "runtime/error.h"
#include "trainer/metrics.h"
#include "trainer/stage_setup.h"

namespace trainer {
namespace {

using recompute::ChunkCandidate;
using recompute::RecomputeCost;

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

// The least non-activation total over replays of the stage under each candidate entry: the
// room the activations may have at most. (A chosen plan's own replay settles the rest.)
int64_t stage_overhead(const Config& config, int64_t stage, const model::LayerDims& dims) {
  std::vector<model::LayerRecompute> entries = recompute::candidate_entries(dims);
  entries.push_back({model::RecomputeMode::full, {}});
  int64_t least = -1;
  for (const model::LayerRecompute& entry : entries) {
    const RankMemory memory =
        predict_rank_memory(with_uniform_entry(config, entry), stage_rank(config.parallel, stage));
    const int64_t bytes = non_activation_bytes(memory);
    least = least < 0 ? bytes : std::min(least, bytes);
  }
  return least;
}

struct StageChoice {
  std::vector<const ChunkCandidate*> chunks;
  RecomputeCost cost;
  int64_t peak = 0;
};

// The cheapest combination (one candidate per chunk) whose scheduled activation peak is at most
// `room`; with none, the one of the least peak (chunks empty when some front is empty).
StageChoice choose_combination(const std::vector<std::vector<ChunkCandidate>>& fronts,
                               const std::vector<parallel::ScheduleOp>& ops, int64_t room,
                               bool* fits) {
  StageChoice best, smallest;
  *fits = false;
  for (const auto& front : fronts)
    if (front.empty()) return best;
  std::vector<size_t> pick(fronts.size(), 0);
  std::vector<recompute::ActivationMemory> memory(fronts.size());
  for (bool more = true; more;) {
    StageChoice here;
    for (size_t v = 0; v < fronts.size(); ++v) {
      const ChunkCandidate& c = fronts[v][pick[v]];
      here.chunks.push_back(&c);
      here.cost = here.cost + c.cost;
      memory[v].forward_end = c.forward_end;
      memory[v].backward_peak = c.backward_peak;
    }
    here.peak = parallel::predict_activation_peak(ops, memory);
    if (smallest.chunks.empty() || here.peak < smallest.peak) smallest = here;
    const bool better = here.cost < best.cost || (here.cost == best.cost && here.peak < best.peak);
    if (here.peak <= room && (!*fits || better)) best = here, *fits = true;
    more = false;  // the next combination, last chunk fastest
    for (size_t v = fronts.size(); v-- > 0;) {
      if (++pick[v] < fronts[v].size()) {
        more = true;
        break;
      }
      pick[v] = 0;
    }
  }
  return *fits ? best : smallest;
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

std::string gib(int64_t bytes) {
  return format_bytes(bytes);
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
                  << ": its least-memory plan predicts " << gib(memory.total()) << " per rank, "
                  << gib(memory.total() - budget) << " over; the largest consumer is "
                  << runtime::category_name(largest) << " (" << gib(memory[largest]) << ")"));
}

}  // namespace

int64_t stage_rank(const parallel::ParallelConfig& parallel, int64_t stage) {
  return parallel.tensor * parallel.data * stage;
}

AutoPlan plan_under_budget(const Config& config, int64_t budget) {
  const auto start = std::chrono::steady_clock::now();
  const parallel::ParallelConfig& pc = config.parallel;
  const auto stage_chunks = parallel::stage_layer_chunks(pc, config.model.num_layers);
  AutoPlan result;
  std::vector<recompute::LayerOverride> overrides;
  for (int64_t stage = 0; stage < pc.pipeline; ++stage) {
    const StageSetup setup = make_stage_setup(config, stage, 0);
    const auto& ranges = stage_chunks[static_cast<size_t>(stage)];
    const std::vector<parallel::ScheduleOp> ops =
        parallel::schedule_ops(setup.schedule, pc.pipeline, stage,
                               static_cast<int64_t>(ranges.size()), setup.num_microbatches);
    int64_t room = budget - stage_overhead(config, stage, setup.dims);
    for (;;) {
      std::vector<std::vector<ChunkCandidate>> fronts;
      for (size_t v = 0; v < ranges.size(); ++v) {
        fronts.push_back(
            recompute::search_chunk_plans(config.model, setup.dims,
                                          {.num_layers = ranges[v].count,
                                           .has_embedding = setup.chunks[v].spec.embedding,
                                           .has_head = setup.chunks[v].spec.head,
                                           .max_bytes = std::max<int64_t>(room, 0)}));
      }
      bool fits = false;
      StageChoice choice = choose_combination(fronts, ops, room, &fits);
      std::vector<recompute::LayerOverride> stage_overrides;
      if (choice.chunks.empty()) {  // nothing under the room at all: the least-memory plan
        for (size_t v = 0; v < ranges.size(); ++v) {
          fronts[v] = recompute::search_chunk_plans(
              config.model, setup.dims,
              {ranges[v].count, setup.chunks[v].spec.embedding, setup.chunks[v].spec.head});
        }
        choice = choose_combination(fronts, ops, -1, &fits);
      }
      for (size_t v = 0; v < ranges.size(); ++v)
        add_overrides(choice.chunks[v]->plan, ranges[v].first, stage_overrides);
      Config planned = config;
      planned.recompute = {};
      planned.recompute.layers = stage_overrides;
      const RankMemory memory = predict_rank_memory(planned, stage_rank(pc, stage));
      if (!fits) throw_no_fit(config, stage, budget, memory);
      if (memory.total() <= budget) {
        overrides.insert(overrides.end(), stage_overrides.begin(), stage_overrides.end());
        result.stage_memory.push_back(memory);
        break;
      }
      room -= memory.total() - budget;  // the overhead of this plan was larger than assumed
    }
  }
  result.recompute.layers = std::move(overrides);
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

Config with_auto_plan(const Config& config) {
  if (!config.recompute.automatic) return config;
  Config planned = config;
  planned.recompute =
      plan_under_budget(config, budget_bytes(config.train.memory_budget_gib)).recompute;
  return planned;
}

}  // namespace trainer
