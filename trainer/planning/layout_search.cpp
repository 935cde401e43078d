// The layout search: enumerate, validate with the config's own rules, bound each valid layout's
// step time from below without planning, then plan and predict in ascending bound order until
// the bound passes the K-th best prediction (Note [Search bound]).
#include "trainer/planning/layout_search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>

#include "runtime/error.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/planning/rank_memory.h"
#include "trainer/util/format_bytes.h"

namespace trainer {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) result.push_back(d);
  return result;
}

// Note [Search bound]
// A plan only adds work to the no-recompute prediction: every rebuild lengthens a backward op,
// and the schedule simulation is monotone in op times, so each stage's finish time can only
// grow. The one term that can shrink is the exposed data-parallel reduction, max(0, G - B) with
// G the reduction's time and B the stage's backward busy time, when it overlaps backward. As a
// stage's finish F is at least its busy time, F + max(0, G - B) >= max(F, G) >= max(F0, G)
// with F0 the no-recompute finish. So each stage's max(F0, G) (its F0 + G without overlap)
// plus the embedding sync and the optimizer, which recompute does not change, is a lower bound
// on its planned total, and the largest over the stages one on the step. Without a pipeline
// F0 = B0 and the bound is the no-recompute prediction itself.
double step_time_bound(const Config& config, const CostModel& costs, const LinkBandwidths& links) {
  const StepPrediction none = predict_step_time(config, costs, links);
  double bound = 0;
  for (int64_t stage = 0; stage < config.parallel.pipeline; ++stage) {
    const StagePrediction& p = none.stages[static_cast<size_t>(stage)];
    const StageSetup setup = make_stage_setup(config, stage, 0);
    const CommTimes comm = comm_times(config, setup, links, costs.times(config, setup));
    const double reduce = reduction_hides_behind_backward(config)
                              ? std::max(p.finish_s, comm.grad_reduce_s) - p.finish_s
                              : comm.grad_reduce_s;
    bound = std::max(bound, p.finish_s + reduce + comm.embedding_sync_s + p.optimizer_s);
  }
  return bound;
}

// A layout's memory without recompute: the largest total of any rank, and the largest of what
// no plan changes (parameters, gradients, optimizer state and the device overhead). One replay
// per stage.
struct UnplannedMemory {
  int64_t total = 0;
  int64_t fixed = 0;
};
UnplannedMemory unplanned_memory(const Config& config) {
  UnplannedMemory memory;
  for (int64_t stage = 0; stage < config.parallel.pipeline; ++stage) {
    const RankMemory m = predict_rank_memory(config, stage_rank(config.parallel, stage));
    memory.total = std::max(memory.total, m.total());
    memory.fixed = std::max(memory.fixed,
                            m[runtime::MemoryCategory::param] + m[runtime::MemoryCategory::grad] +
                                m[runtime::MemoryCategory::optimizer] + m.device_overhead);
  }
  return memory;
}

bool better(const LayoutResult& a, const LayoutResult& b) {
  if (a.prediction.step_s != b.prediction.step_s) return a.prediction.step_s < b.prediction.step_s;
  return a.peak_bytes < b.peak_bytes;
}

// `config` (no recompute) predicted as it is: the plan when it fits, as nothing is cheaper.
LayoutResult unplanned_layout(const Config& config, const CostModel& costs,
                              const SearchRequest& request, const UnplannedMemory& memory) {
  LayoutResult result;
  result.config = config;
  result.prediction = predict_step_time(config, costs, request.links);
  result.peak_bytes = memory.total;
  return result;
}

// Plans `config` under the budget and predicts it; nullopt when no plan fits.
std::optional<LayoutResult> plan_layout(const Config& config, const CostModel& costs,
                                        const SearchRequest& request) {
  LayoutResult result;
  result.config = config;
  try {
    const AutoPlan plan = plan_under_budget(config, request.budget, {&costs, request.links});
    result.config.recompute = plan.recompute;
    for (const ChoiceProof proof : plan.stage_proof) result.proof = std::max(result.proof, proof);
  } catch (const runtime::ConfigError& error) {
    if (error.path() != "train.memory_budget_gib") throw;
    return std::nullopt;
  }
  const PlanSummary summary = summarize_plan(result.config);
  result.prediction = predict_step_time(result.config, costs, request.links);
  result.peak_bytes = summary.peak;
  result.recompute_share = summary.recompute_share;
  return result;
}

// The cost model of `config`: the first of request.shape_costs whose profile has its rank
// shapes (every stage's layers share them; `config` then names it), else request.costs.
const CostModel& layout_costs(Config& config, const SearchRequest& request) {
  if (request.shape_costs.empty()) return *request.costs;
  const StageSetup setup = make_stage_setup(config, 0, 0);
  for (const SearchRequest::ShapeProfile& profile : request.shape_costs) {
    if (profile.costs.times(config, setup).from_profile) {
      config.train.time_profile = profile.path;
      return profile.costs;
    }
  }
  return *request.costs;
}

struct Candidate {
  Layout layout;
  Config config;
  const CostModel* costs = nullptr;
  double bound_s = 0;
};

std::string gib_text(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB",
                static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
  return text;
}

}  // namespace

std::vector<Layout> enumerate_layouts(const Config& base, int64_t ranks) {
  std::vector<Layout> layouts;
  const int64_t layers = base.model.num_layers, global = base.train.global_batch_size;
  for (const int64_t tp : divisors(ranks)) {
    for (const int64_t cp : divisors(ranks / tp)) {
      for (const int64_t pp : divisors(ranks / tp / cp)) {
        const int64_t dp = ranks / tp / cp / pp;
        std::vector<int64_t> vps = {1};
        if (pp > 1 && layers % pp == 0)
          for (const int64_t v : divisors(layers / pp))
            if (v > 1) vps.push_back(v);
        // A global batch the replicas cannot share evenly: one (invalid) entry that says so.
        const std::vector<int64_t> micro_batches =
            global % dp == 0 ? divisors(global / dp)
                             : std::vector<int64_t>{base.train.micro_batch_size};
        for (const int64_t vp : vps)
          for (const bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
            for (const int64_t mb : micro_batches)
              for (const bool dist :
                   dp* cp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
                layouts.push_back({.tensor = tp,
                                   .context = cp,
                                   .pipeline = pp,
                                   .virtual_pipeline = vp,
                                   .data = dp,
                                   .sequence_parallel = sp,
                                   .micro_batch = mb,
                                   .distributed_optimizer = dist});
      }
    }
  }
  return layouts;
}

Config layout_config(const Config& base, const Layout& layout, int64_t ranks) {
  Config config = base;
  parallel::ParallelConfig& p = config.parallel;
  p.tensor = layout.tensor;
  p.context = layout.context;
  p.pipeline = layout.pipeline;
  p.virtual_pipeline = layout.virtual_pipeline;
  p.data = layout.data;
  p.sequence_parallel = layout.sequence_parallel;
  p.layers_per_stage.clear();
  config.train.micro_batch_size = layout.micro_batch;
  config.optimizer.distributed = layout.distributed_optimizer;
  config.recompute = {};
  validate_config(config, ConfigUse::plan);
  validate_launch(config, ranks);
  return config;
}

SearchResult search_layouts(const Config& base, const SearchRequest& request) {
  TRAINER_ASSERT(request.costs != nullptr && request.top > 0 && request.ranks > 0,
                 "search_layouts needs a cost model, top > 0 and ranks > 0");
  const auto start = std::chrono::steady_clock::now();
  SearchResult result;
  std::vector<Candidate> candidates;
  std::string first_invalid;
  for (const Layout& layout : enumerate_layouts(base, request.ranks)) {
    ++result.enumerated;
    try {
      Config config = layout_config(base, layout, request.ranks);
      const CostModel& costs = layout_costs(config, request);
      const double bound = step_time_bound(config, costs, request.links);
      candidates.push_back({layout, std::move(config), &costs, bound});
    } catch (const runtime::ConfigError& error) {
      if (first_invalid.empty()) first_invalid = error.what();
    }
  }
  result.valid = static_cast<int64_t>(candidates.size());
  if (candidates.empty()) {
    throw runtime::ConfigError(
        "parallel",
        TRAINER_STR("none of the "
                    << result.enumerated << " layouts of --ranks " << request.ranks
                    << " is valid for this model; the first fails with: " << first_invalid));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.bound_s < b.bound_s; });
  int64_t least_fixed = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& candidate = candidates[i];
    // Relative slack: the bound and a prediction without recompute may differ in the last bits.
    if (result.best.size() == request.top &&
        candidate.bound_s > result.best.back().prediction.step_s * (1 + 1e-9)) {
      result.cut_by_bound = static_cast<int64_t>(candidates.size() - i);
      break;
    }
    // Shortcuts (docs/layout_search.md, "How it stays fast"): a layout whose parameters and
    // optimizer state alone exceed the budget cannot fit; one that fits without recompute plans
    // none (nothing is cheaper).
    std::optional<LayoutResult> planned;
    const UnplannedMemory memory = unplanned_memory(candidate.config);
    if (least_fixed < 0 || memory.fixed < least_fixed) least_fixed = memory.fixed;
    if (memory.fixed > request.budget) {
      ++result.over_without_activations;
      continue;
    }
    if (memory.total <= request.budget) {
      planned = unplanned_layout(candidate.config, *candidate.costs, request, memory);
      ++result.without_recompute;
    }
    if (!planned) {
      ++result.planned;
      planned = plan_layout(candidate.config, *candidate.costs, request);
      if (!planned) continue;
    }
    ++result.fit;
    planned->layout = candidate.layout;
    planned->bound_s = candidate.bound_s;
    const auto at = std::upper_bound(result.best.begin(), result.best.end(), *planned, better);
    result.best.insert(at, std::move(*planned));
    if (result.best.size() > request.top) result.best.pop_back();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.best.empty()) {
    throw runtime::ConfigError(
        "train.memory_budget_gib",
        TRAINER_STR(base.train.memory_budget_gib
                    << " GiB (--budget-gib) fits none of the " << result.valid
                    << " valid layouts of --ranks " << request.ranks
                    << (least_fixed >= 0 ? "; parameters, gradients and optimizer state alone "
                                           "take at least " +
                                               format_bytes(least_fixed) + " per rank"
                                         : std::string())));
  }
  return result;
}

void print_search(const SearchResult& result, const SearchRequest& request, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line,
                "the %zu fastest layouts on %lld ranks under %s per rank (predicted; ties to less "
                "memory)\n",
                result.best.size(), static_cast<long long>(request.ranks),
                gib_text(request.budget).c_str());
  out << line;
  out << "  rank | tp | cp | pp | vp |  dp | sp | micro | dist-opt | memory/rank |   step ms |"
         "   tokens/s | MFU % | recompute % | times\n";
  std::map<std::string, int> sources;
  for (size_t i = 0; i < result.best.size(); ++i) {
    const LayoutResult& r = result.best[i];
    const Layout& l = r.layout;
    std::snprintf(line, sizeof line,
                  "  %4zu | %2lld | %2lld | %2lld | %2lld | %3lld | %2s | %5lld | %8s | %11s |"
                  " %9.1f | %10.0f | %5.1f | %11.1f | %s\n",
                  i + 1, static_cast<long long>(l.tensor), static_cast<long long>(l.context),
                  static_cast<long long>(l.pipeline), static_cast<long long>(l.virtual_pipeline),
                  static_cast<long long>(l.data), l.sequence_parallel ? "on" : "-",
                  static_cast<long long>(l.micro_batch), l.distributed_optimizer ? "on" : "-",
                  format_bytes(r.peak_bytes).c_str(), r.prediction.step_s * 1e3,
                  r.prediction.tokens_per_s, r.prediction.mfu_percent, 100.0 * r.recompute_share,
                  r.prediction.source.starts_with("the profile") ? "profile" : "roofline");
    out << line;
    ++sources[r.prediction.source];
  }
  for (const ChoiceProof proof : {ChoiceProof::near, ChoiceProof::best_found}) {
    std::string rows;
    for (size_t i = 0; i < result.best.size(); ++i)
      if (result.best[i].proof == proof) rows += (rows.empty() ? "" : ", ") + std::to_string(i + 1);
    if (!rows.empty()) out << "rows " << rows << ", some stage: " << describe_proof(proof) << "\n";
  }
  std::snprintf(line, sizeof line,
                "layouts: %lld enumerated, %lld valid, %lld looked at in order of their lower "
                "bound: %lld fit (%lld without recompute, %lld planned by the budget planner), "
                "%lld skipped as parameters, gradients and optimizer state alone exceed the "
                "budget; %lld never looked at (bound above the last of the best %zu); searched in "
                "%.2f s\n",
                static_cast<long long>(result.enumerated), static_cast<long long>(result.valid),
                static_cast<long long>(result.valid - result.cut_by_bound),
                static_cast<long long>(result.fit),
                static_cast<long long>(result.without_recompute),
                static_cast<long long>(result.planned),
                static_cast<long long>(result.over_without_activations),
                static_cast<long long>(result.cut_by_bound), request.top, result.seconds);
  out << line;
  for (const auto& [source, count] : sources)
    out << "time from " << source << " (" << count << " of the rows)\n";
  if (request.ranks > 1) out << "links " << request.links.source << "\n";
  out << "not modelled: tensor- and context-parallel communication overlapping compute (it is\n"
         "  counted in full); NCCL's algorithm choice (tree, NVLS; rings are assumed); contention\n"
         "  between groups sharing links; kernel launch gaps; the pipeline's blocking "
         "send/receive\n"
         "  pairing beyond the data dependencies; uneven parallel.layers_per_stage splits (not\n"
         "  searched). The data-parallel reduction hides behind backward when\n"
         "  optimizer.overlap_grad_reduce is on, on CUDA (on the CPU it is exposed). A profile\n"
         "  prices only layouts with its shapes;\n"
         "  others use the roofline.\n";
}

std::string best_layout_yaml(const SearchResult& result) {
  TRAINER_ASSERT(!result.best.empty(), "best_layout_yaml needs a result");
  return to_yaml(result.best.front().config);
}

int run_layout_search(const Config& config, const SearchFlags& flags, std::ostream& out) {
  SearchRequest request{.ranks = flags.ranks,
                        .budget = budget_bytes(config.train.memory_budget_gib),
                        .costs = flags.costs,
                        .shape_costs = {},
                        .links = flags.links,
                        .top = static_cast<size_t>(flags.top)};
  // With more than one profile, each prices its own shapes (the first is flags.costs's).
  for (size_t i = 0; flags.profiles.size() > 1 && i < flags.profiles.size(); ++i) {
    const std::string& path = flags.profiles[i];
    request.shape_costs.push_back(
        {path, i == 0 ? *flags.costs : CostModel({}, read_time_profile(path), path)});
  }
  const SearchResult result = search_layouts(config, request);
  if (flags.emit_yaml) {
    out << best_layout_yaml(result);
  } else {
    print_search(result, request, out);
  }
  return 0;
}

}  // namespace trainer
