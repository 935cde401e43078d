// The recompute planner's search over one model chunk: every plan of its layers (each layer
// none or a selective module subset, or in a full checkpoint group of any size), reduced to the
// plans no other beats on all three of forward-end bytes, backward-peak bytes and recompute
// cost (the Pareto front). Exact: a dynamic program over the layers whose state is what the
// memory model (recompute/memory_model.h) needs of the layers below. The stage-level choice
// among fronts, against a budget, is the trainer's (trainer/planning/auto_plan.h).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/gpt_config.h"
#include "model/layer_stash.h"
#include "recompute/plan.h"

namespace trainer {

// What rebuilding costs, per microbatch: first the price (the objective: predicted nanoseconds,
// or matmul FLOPs), then, among plans of equal price, the bytes rebuilt. Ordered
// lexicographically.
struct RecomputeCost {
  int64_t price = 0;
  int64_t bytes = 0;  // bytes of tensors rebuilt in backward

  RecomputeCost operator+(const RecomputeCost& o) const {
    return {price + o.price, bytes + o.bytes};
  }
  auto operator<=>(const RecomputeCost&) const = default;
};

// The price of one layer's recompute for one microbatch: a selective entry's rebuild, and a
// full layer's (what its group's forward rerun spends on it). Unset: matmul FLOPs
// (model/flops.h), the FLOPs objective.
struct RecomputePrices {
  std::function<int64_t(const model::LayerRecompute&)> selective;
  int64_t full_layer = 0;
};

// One plan of a chunk with its cost, for one microbatch in flight.
struct ChunkCandidate {
  int64_t forward_end = 0;    // bytes kept at the end of forward (ActivationMemory's)
  int64_t backward_peak = 0;  // bytes at the largest point of backward
  RecomputeCost cost;
  recompute::RecomputePlan plan;
};

struct ChunkSearch {
  int64_t num_layers = 0;
  bool has_embedding = false;
  bool has_head = false;
  // Plans whose forward end or backward peak exceeds this are dropped early (bytes; < 0: none).
  int64_t max_bytes = -1;
  // The entries a layer may take besides full groups (empty: candidate_entries), and whether
  // full groups may be used.
  std::vector<model::LayerRecompute> entries;
  bool allow_full = true;
  RecomputePrices prices;
};

// The Pareto front of the chunk's plans, by ascending cost then bytes; each plan's bytes equal
// predict_activation_memory's for it. Deterministic.
std::vector<ChunkCandidate> search_chunk_plans(const model::GptConfig& config,
                                               const model::LayerDims& dims,
                                               const ChunkSearch& search);

// None and every selective module subset (15), in module-mask order.
std::vector<model::LayerRecompute> every_layer_entry();

// The layer entries the search chooses among: none and every distinct selective module subset
// (subsets that keep the same tensors under this attention backend count once, the cheaper).
std::vector<model::LayerRecompute> candidate_entries(const model::LayerDims& dims,
                                                     const RecomputePrices& prices = {});

}  // namespace trainer
