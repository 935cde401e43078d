// Note [Stage choice]
// A combination's peak is predict_activation_peak over the stage's ops, and it never decreases
// when one chunk's forward_end or backward_peak grows (forward adds forward_end to what is live;
// a backward peaks at what is live less its own microbatch's forward_end plus its backward_peak,
// and its own forward_end cancels). So with chunks [0, v) picked, giving every later chunk the
// least forward_end and the least backward_peak of its front (perhaps of two candidates) bounds
// the peak from below, and the picked costs plus each later front's least cost bound the cost
// (costs add, and (price, bytes) order survives sums). The search walks the combinations in the
// brute-force order (the last chunk fastest), keeps a combination only when strictly better,
// and cuts a subtree only when its bounds show that nothing in it fits or is strictly better:
// the result is the brute force's, found after far fewer peaks on the fronts the planner makes.
#include "trainer/planning/stage_choice.h"

#include <algorithm>

namespace trainer {
namespace {

class Search {
 public:
  Search(const std::vector<std::vector<ChunkCandidate>>& fronts,
         const std::vector<parallel::ScheduleOp>& ops)
      : fronts_(fronts),
        ops_(ops),
        pick_(fronts.size(), 0),
        least_(fronts.size()),
        rest_cost_(fronts.size() + 1) {
    for (size_t v = 0; v < fronts.size(); ++v) {
      recompute::ActivationMemory& least = least_[v];
      least.forward_end = fronts[v][0].forward_end;
      least.backward_peak = fronts[v][0].backward_peak;
      for (const ChunkCandidate& c : fronts[v]) {
        least.forward_end = std::min(least.forward_end, c.forward_end);
        least.backward_peak = std::min(least.backward_peak, c.backward_peak);
      }
    }
    for (size_t v = fronts.size(); v-- > 0;) {
      RecomputeCost cheapest = fronts[v][0].cost;
      for (const ChunkCandidate& c : fronts[v]) cheapest = std::min(cheapest, c.cost);
      rest_cost_[v] = cheapest + rest_cost_[v + 1];
    }
    memory_ = least_;
  }

  // The cheapest combination that fits `room` (then the lower peak); empty chunks when none.
  StageChoice cheapest_fitting(int64_t room) {
    room_ = room;
    return run(Objective::cheapest_fitting);
  }

  // The combination of the least peak.
  StageChoice least_peak() { return run(Objective::least_peak); }

 private:
  enum class Objective { cheapest_fitting, least_peak };

  StageChoice run(Objective objective) {
    objective_ = objective;
    found_ = false;
    best_ = {};
    visit(0, {});
    return best_;
  }

  int64_t peak() const { return parallel::predict_activation_peak(ops_, memory_); }

  // Whether a combination of cost at least `cost` and peak at least `peak` could be kept.
  bool could_improve(const RecomputeCost& cost, int64_t peak) const {
    if (objective_ == Objective::least_peak) return !found_ || peak < best_.peak;
    if (peak > room_) return false;
    if (!found_) return true;
    return cost < best_.cost || (cost == best_.cost && peak < best_.peak);
  }

  // Chunks [0, v) are picked (pick_, memory_) at `cost`; the rest hold their least memory.
  void visit(size_t v, const RecomputeCost& cost) {
    if (v == fronts_.size()) {
      const int64_t here = peak();
      if (!could_improve(cost, here)) return;
      best_.chunks.clear();
      for (size_t c = 0; c < fronts_.size(); ++c) best_.chunks.push_back(&fronts_[c][pick_[c]]);
      best_.cost = cost;
      best_.peak = here;
      found_ = true;
      return;
    }
    for (size_t i = 0; i < fronts_[v].size(); ++i) {
      const ChunkCandidate& c = fronts_[v][i];
      const RecomputeCost bound = cost + c.cost + rest_cost_[v + 1];
      if (objective_ == Objective::cheapest_fitting && found_ && best_.cost < bound) continue;
      pick_[v] = i;
      memory_[v].forward_end = c.forward_end;
      memory_[v].backward_peak = c.backward_peak;
      // The last chunk's bound is the combination itself: visit computes it once.
      if (v + 1 == fronts_.size() || could_improve(bound, peak())) visit(v + 1, cost + c.cost);
    }
    memory_[v] = least_[v];
  }

  const std::vector<std::vector<ChunkCandidate>>& fronts_;
  const std::vector<parallel::ScheduleOp>& ops_;
  std::vector<recompute::ActivationMemory> memory_;
  std::vector<size_t> pick_;
  std::vector<recompute::ActivationMemory> least_;
  std::vector<RecomputeCost> rest_cost_;  // [v]: the least cost of chunks v.. together
  Objective objective_ = Objective::cheapest_fitting;
  int64_t room_ = 0;
  bool found_ = false;
  StageChoice best_;
};

}  // namespace

StageChoice choose_stage_combination(const std::vector<std::vector<ChunkCandidate>>& fronts,
                                     const std::vector<parallel::ScheduleOp>& ops, int64_t room) {
  for (const auto& front : fronts)
    if (front.empty()) return {};
  Search search(fronts, ops);
  StageChoice choice = search.cheapest_fitting(room);
  if (choice.chunks.empty()) return search.least_peak();
  choice.fits = true;
  return choice;
}

}  // namespace trainer
