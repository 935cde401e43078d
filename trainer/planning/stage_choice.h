// A pipeline stage's recompute choice across its chunks: one candidate per chunk (each chunk's
// front from chunk_search.h), the cheapest whose scheduled activation peak fits. Under
// interleaving a stage holds vp chunks, and the combinations number the product of the fronts'
// sizes; the search is a branch and bound that returns what trying every combination in order
// returns, within a limit of visits that only deep interleaving on tight rooms reaches (Note
// [Stage choice] in stage_choice.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline/schedules.h"
#include "trainer/planning/chunk_search.h"

namespace trainer {

// What is known of a choice against the cheapest fitting combination (Note [Stage choice]).
enum class ChoiceProof {
  cheapest,    // the search ran to its end: nothing fitting is cheaper
  near,        // the exact search hit its limit; nothing fitting is cheaper by kNearGap or more
  best_found,  // both searches hit their limits: the best they and the greedy found
};
inline constexpr double kNearGap = 1e-2;  // of the recompute price

// A proof in words, for the plan's printout and the run's log: "" for cheapest, else "the
// interleaved chunks' combination is within 1% of the cheapest recompute price (the exact
// search stopped at its limit)" or its best_found counterpart.
std::string describe_proof(ChoiceProof proof);
// "stage S: " and describe_proof for each stage (proofs[S]) not proven the cheapest: what
// `trainer plan` prints and a recompute.auto run logs.
std::vector<std::string> stage_proof_lines(const std::vector<ChoiceProof>& proofs);

// The walks' limits, in subtrees visited (not seconds, so that every rank plans alike).
struct ChoiceLimits {
  int64_t exact_visits = 100'000;
  int64_t near_visits = 1'000'000;
  int64_t least_peak_visits = 1'000'000;  // the least-peak walk, when no fit was found
};

struct StageChoice {
  std::vector<const ChunkCandidate*> chunks;  // one per chunk; empty when some front is empty
  RecomputeCost cost;
  int64_t peak = 0;  // the scheduled activation peak (parallel::predict_activation_peak)
  bool fits = false;
  ChoiceProof proof = ChoiceProof::cheapest;
};

// The cheapest combination (ties: the lower peak, then the first in the order that varies the
// last chunk fastest) whose peak over `ops` is at most `room` (fits = true); with none, the
// combination of the least peak (the first such).
StageChoice choose_stage_combination(const std::vector<std::vector<ChunkCandidate>>& fronts,
                                     const std::vector<parallel::ScheduleOp>& ops, int64_t room,
                                     const ChoiceLimits& limits = {});

}  // namespace trainer
