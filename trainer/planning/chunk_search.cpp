// The planner's dynamic program over one chunk's layers. State after k layers: bytes kept so
// far (above the embedding), the largest backward point so far (above the embedding), and
// recompute cost; states that another beats on all three are dropped, which keeps the search
// exact (what a later layer adds depends only on the kept bytes below it).
#include "trainer/planning/chunk_search.h"

#include <algorithm>
#include <tuple>

#include "model/embedding_head.h"
#include "model/flops.h"
#include "model/recompute_modules.h"

namespace trainer {
namespace {

using model::LayerRecompute;
using model::RecomputeMode;

// What one layer entry adds: kept bytes, bytes live while its backward rebuilds, its cost.
struct EntryCost {
  LayerRecompute entry;
  int64_t kept = 0, rebuilt = 0;
  RecomputeCost cost;
};

EntryCost entry_cost(const model::LayerDims& dims, const LayerRecompute& entry,
                     const RecomputePrices& prices) {
  const auto spec = model::layer_stash_spec(dims, entry);
  const int64_t dropped = model::stash_dropped_bytes(spec);
  const int64_t price = entry.mode == RecomputeMode::none ? 0
                        : prices.selective         ? prices.selective(entry)
                                                   : model::selective_recompute_flops(dims, entry);
  return {entry, model::stash_kept_bytes(spec), dropped, {price, dropped}};
}

std::vector<EntryCost> entry_costs(const model::LayerDims& dims,
                                   const std::vector<LayerRecompute>& allowed,
                                   const RecomputePrices& prices) {
  std::vector<EntryCost> costs;
  for (const LayerRecompute& entry : allowed.empty() ? candidate_entries(dims, prices) : allowed)
    costs.push_back(entry_cost(dims, entry, prices));
  return costs;
}

struct State {
  int64_t kept = 0;   // bytes kept by the layers so far
  int64_t worst = 0;  // largest backward point so far, above the embedding
  RecomputeCost cost;
  int64_t parent = -1;  // index into the states of the layer the last choice started at
  int64_t from = 0;     // that layer
  int64_t choice = 0;   // >= 0: entry index; < 0: a full group of -choice layers
};

bool beats(const State& a, const State& b) {
  return a.kept <= b.kept && a.worst <= b.worst && !(b.cost < a.cost);
}

// The states no other beats, in (cost, kept, worst) order; the first of equal ones stays. (The
// cost's order is lexicographic, which adding the same cost to both sides keeps: so a beaten
// state stays beaten whatever the layers above choose.)
std::vector<State> pareto(std::vector<State> states) {
  std::stable_sort(states.begin(), states.end(), [](const State& a, const State& b) {
    return std::tie(a.cost, a.kept, a.worst) < std::tie(b.cost, b.kept, b.worst);
  });
  std::vector<State> front;
  for (const State& s : states) {
    const bool beaten =
        std::any_of(front.begin(), front.end(), [&](const State& f) { return beats(f, s); });
    if (!beaten) front.push_back(s);
  }
  return front;
}

// The plan a final state stands for, read back through the parents.
recompute::RecomputePlan plan_of(const std::vector<std::vector<State>>& states, int64_t num_layers,
                      int64_t index, const std::vector<EntryCost>& entries) {
  recompute::RecomputePlan plan = recompute::RecomputePlan::uniform(num_layers, {});
  std::vector<std::pair<int64_t, int64_t>> groups;  // (first layer, size)
  for (int64_t k = num_layers; k > 0;) {
    const State& s = states[static_cast<size_t>(k)][static_cast<size_t>(index)];
    if (s.choice >= 0) {
      plan.layers[static_cast<size_t>(s.from)] = entries[static_cast<size_t>(s.choice)].entry;
    } else {
      groups.emplace_back(s.from, -s.choice);
    }
    index = s.parent;
    k = s.from;
  }
  std::reverse(groups.begin(), groups.end());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int64_t i = groups[g].first; i < groups[g].first + groups[g].second; ++i) {
      plan.layers[static_cast<size_t>(i)] = {RecomputeMode::full, {}};
      plan.group[static_cast<size_t>(i)] = static_cast<int64_t>(g);
    }
  }
  return plan;
}

}  // namespace

std::vector<LayerRecompute> every_layer_entry() {
  std::vector<LayerRecompute> entries;
  for (int mask = 0; mask < 16; ++mask) {
    LayerRecompute entry;
    if (mask != 0) {
      entry.mode = RecomputeMode::selective;
      entry.modules = {.core_attn = (mask & 1) != 0,  // SelectiveModules::mask's bits
                       .act = (mask & 2) != 0,
                       .layernorm = (mask & 4) != 0,
                       .mlp = (mask & 8) != 0};
    }
    entries.push_back(entry);
  }
  return entries;
}

std::vector<LayerRecompute> candidate_entries(const model::LayerDims& dims,
                                              const RecomputePrices& prices) {
  std::vector<EntryCost> all;
  for (const LayerRecompute& entry : every_layer_entry())
    all.push_back(entry_cost(dims, entry, prices));
  // An entry is useless when another keeps no more, peaks no higher in backward and costs no
  // more (the first of equal ones stays).
  std::vector<LayerRecompute> entries;
  for (size_t i = 0; i < all.size(); ++i) {
    bool useless = false;
    for (size_t j = 0; j < all.size() && !useless; ++j) {
      const EntryCost &a = all[j], &b = all[i];
      const bool no_worse =
          a.kept <= b.kept && a.kept + a.rebuilt <= b.kept + b.rebuilt && !(b.cost < a.cost);
      const bool equal = a.kept == b.kept && a.rebuilt == b.rebuilt && a.cost == b.cost;
      useless = j != i && no_worse && (!equal || j < i);
    }
    if (!useless) entries.push_back(all[i].entry);
  }
  return entries;
}

std::vector<ChunkCandidate> search_chunk_plans(const model::GptConfig& config,
                                               const model::LayerDims& dims,
                                               const ChunkSearch& search) {
  const int64_t L = search.num_layers;
  const std::vector<EntryCost> entries = entry_costs(dims, search.entries, search.prices);
  const int64_t embedding =
      search.has_embedding ? model::stash_kept_bytes(model::embedding_stash_spec(dims)) : 0;
  const int64_t head =
      search.has_head ? model::stash_kept_bytes(model::head_stash_spec(config, dims, true)) : 0;
  const int64_t checkpoint = dims.seq_shard() * dims.micro_batch * dims.hidden *
                             runtime::dtype_size(dims.activation_dtype);
  const int64_t full_stash = model::stash_kept_bytes(model::layer_stash_spec(dims, {}));
  const int64_t layer_price =
      search.prices.selective ? search.prices.full_layer : model::layer_forward_flops(dims).total();
  auto fits = [&](const State& s) {
    return search.max_bytes < 0 || (embedding + head + s.kept <= search.max_bytes &&
                                    embedding + s.worst <= search.max_bytes);
  };

  std::vector<std::vector<State>> states(static_cast<size_t>(L) + 1);
  states[0].push_back(State{});
  for (int64_t k = 0; k < L; ++k) {
    std::vector<State>& here = states[static_cast<size_t>(k)];
    here = pareto(std::move(here));
    for (int64_t p = 0; p < static_cast<int64_t>(here.size()); ++p) {
      const State& s = here[static_cast<size_t>(p)];
      for (size_t e = 0; e < entries.size(); ++e) {
        const EntryCost& c = entries[e];
        State next{s.kept + c.kept,
                   std::max(s.worst, s.kept + c.kept + c.rebuilt),
                   s.cost + c.cost,
                   p,
                   k,
                   static_cast<int64_t>(e)};
        if (fits(next)) states[static_cast<size_t>(k) + 1].push_back(next);
      }
      for (int64_t g = 1; search.allow_full && k + g <= L; ++g) {
        State next{s.kept + checkpoint,
                   std::max(s.worst, s.kept + g * full_stash),
                   s.cost + RecomputeCost{g * layer_price, g * full_stash},
                   p,
                   k,
                   -g};
        if (fits(next)) states[static_cast<size_t>(k + g)].push_back(next);
      }
    }
  }
  std::vector<State>& last = states[static_cast<size_t>(L)];
  last = pareto(std::move(last));
  std::vector<ChunkCandidate> front;
  for (int64_t i = 0; i < static_cast<int64_t>(last.size()); ++i) {
    const State& s = last[static_cast<size_t>(i)];
    front.push_back({embedding + head + s.kept, std::max(embedding, embedding + s.worst), s.cost,
                     plan_of(states, L, i, entries)});
  }
  return front;
}

}  // namespace trainer
