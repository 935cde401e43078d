// Note [Stage choice]
// A combination's peak is predict_activation_peak over the stage's ops. Every op's value there
// is linear in the chunks' memory: a forward's is the sum over chunks of (microbatches of the
// chunk live) x forward_end, a backward's the same less its own forward_end plus its
// backward_peak. So the peak is the largest of a few distinct rows (coefficients per chunk's
// forward_end, and which chunk's backward_peak, if any), rows that another row bounds dropped:
// PeakRows. The peak never decreases when one chunk's memory grows.
//
// The search walks the combinations in the brute-force order (the last chunk fastest), keeps a
// combination only when strictly better (cost, then peak), and cuts a subtree only when its
// bounds show that nothing in it fits or is strictly better, so that it returns the brute
// force's answer:
// - the peak: the picked chunks' terms of each row plus each later chunk's least term in it;
// - the cost: the picked costs plus each later front's least cost; and, per row, the linear
//   relaxation of "the later chunks' terms fit the room that row leaves": each later front's
//   lower convex hull of (term, price) walked from its cheapest point, the steps of every front
//   taken in order of price per byte saved until the row fits, the last one in part. No choice
//   of the later chunks that fits that row costs less, so a subtree whose relaxation prices
//   above a price already reached (or above the greedy's below) holds nothing strictly better.
// A greedy first (from each chunk's cheapest candidate, the move of least price per byte of
// peak until the peak fits, then each chunk in turn moved to its cheapest candidate that keeps
// it fitting) gives a price to cut at before the walk finds one.
//
// Deep interleaving on a tight room can leave the bounds millions of subtrees: the fronts are
// alike, and many combinations price within a millionth of each other. Past
// ChoiceLimits::exact_visits the walk stops and a second walk settles for kNearGap: it cuts every
// subtree that cannot beat a price reached by that share of it, so that what it returns, when it
// ends, is within kNearGap of the cheapest (ChoiceProof::near). Past near_visits too, the better of
// the walks' best and the greedy's is returned as ChoiceProof::best_found. Where neither walk nor
// the greedy found a fit (the greedy stops when no single move lowers the peak, at the tightest
// rooms), the least-peak walk's combination, when it fits, made cheaper as the greedy's second
// half does, is returned as best_found: a walk cut short never turns a fit into "does not
// fit". The limits count visits, not seconds, so that every rank plans alike.
#include "trainer/planning/stage_choice.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "runtime/error.h"

namespace trainer {
namespace {

// The rows of a stage's peak (Note [Stage choice]).
struct PeakRows {
  std::vector<std::vector<int64_t>> forward;  // [row][chunk]: coefficient of forward_end
  std::vector<int> backward;                  // [row]: the chunk whose backward_peak adds, or -1

  int64_t term(size_t row, size_t chunk, const ChunkCandidate& c) const {
    return forward[row][chunk] * c.forward_end +
           (backward[row] == static_cast<int>(chunk) ? c.backward_peak : 0);
  }
};

// row a <= row b for every memory: no larger coefficient, and a's backward term is b's.
bool bounded_by(const std::vector<int64_t>& fa, int ba, const std::vector<int64_t>& fb, int bb) {
  if (ba >= 0 && ba != bb) return false;
  for (size_t v = 0; v < fa.size(); ++v)
    if (fa[v] > fb[v]) return false;
  return true;
}

PeakRows peak_rows(const std::vector<parallel::ScheduleOp>& ops, size_t chunks) {
  std::set<std::pair<std::vector<int64_t>, int>> distinct;
  std::vector<int64_t> live(chunks, 0);
  for (const parallel::ScheduleOp& op : ops) {
    const auto c = static_cast<size_t>(op.chunk);
    if (op.forward) {
      ++live[c];
      distinct.insert({live, -1});
    } else {
      --live[c];
      distinct.insert({live, static_cast<int>(c)});
    }
  }
  const std::vector<std::pair<std::vector<int64_t>, int>> all(distinct.begin(), distinct.end());
  PeakRows rows;
  for (size_t i = 0; i < all.size(); ++i) {
    bool dropped = false;
    for (size_t j = 0; j < all.size() && !dropped; ++j) {
      if (j == i || !bounded_by(all[i].first, all[i].second, all[j].first, all[j].second)) continue;
      // Equal rows keep the first.
      dropped = !bounded_by(all[j].first, all[j].second, all[i].first, all[i].second) || j < i;
    }
    if (dropped) continue;
    rows.forward.push_back(all[i].first);
    rows.backward.push_back(all[i].second);
  }
  return rows;
}

// One step along a front's hull in one row: bytes saved for price added; once merged, what the
// steps before it in the merged order save and add.
struct HullStep {
  double per_byte;
  int64_t saved;
  int64_t price;
  int64_t saved_before = 0;
  int64_t price_before = 0;
};

class Search {
 public:
  Search(const std::vector<std::vector<ChunkCandidate>>& fronts,
         const std::vector<parallel::ScheduleOp>& ops, const ChoiceLimits& limits)
      : fronts_(fronts),
        rows_(peak_rows(ops, fronts.size())),
        limits_(limits),
        pick_(fronts.size(), 0) {
    const size_t V = fronts.size(), R = rows_.forward.size();
    least_term_.assign(R, std::vector<int64_t>(V + 1, 0));
    cheapest_term_.assign(R, std::vector<int64_t>(V + 1, 0));
    steps_.assign(R, std::vector<std::vector<HullStep>>(V + 1));
    rest_cost_.assign(V + 1, {});
    for (size_t v = V; v-- > 0;) {
      RecomputeCost least = fronts[v][0].cost;
      for (const ChunkCandidate& c : fronts[v]) least = std::min(least, c.cost);
      rest_cost_[v] = least + rest_cost_[v + 1];
      for (size_t r = 0; r < R; ++r) {
        int64_t low = rows_.term(r, v, fronts[v][0]);
        for (const ChunkCandidate& c : fronts[v]) low = std::min(low, rows_.term(r, v, c));
        least_term_[r][v] = low + least_term_[r][v + 1];
        const auto [start, hull] = front_hull(r, v);
        cheapest_term_[r][v] = start + cheapest_term_[r][v + 1];
        std::vector<HullStep> merged = steps_[r][v + 1];
        merged.insert(merged.end(), hull.begin(), hull.end());
        std::stable_sort(merged.begin(), merged.end(), [](const HullStep& a, const HullStep& b) {
          return a.per_byte < b.per_byte;
        });
        int64_t saved = 0, price = 0;
        for (HullStep& step : merged) {
          step.saved_before = saved;
          step.price_before = price;
          saved += step.saved;
          price += step.price;
        }
        steps_[r][v] = std::move(merged);
      }
    }
    partial_.assign(V + 1, std::vector<int64_t>(R, 0));
  }

  StageChoice cheapest_fitting(int64_t room) {
    room_ = room;
    objective_ = Objective::cheapest_fitting;
    const std::optional<StageChoice> greedy = greedy_fitting();
    cut_price_ = greedy ? std::optional<int64_t>(greedy->cost.price) : std::nullopt;
    gap_ = 0;
    StageChoice found = run(limits_.exact_visits);
    if (!stopped_) return found;
    gap_ = kNearGap;
    if (!found.chunks.empty() && (!cut_price_ || found.cost.price < *cut_price_))
      cut_price_ = found.cost.price;
    const StageChoice near = run(limits_.near_visits);
    const ChoiceProof proof = stopped_ ? ChoiceProof::best_found : ChoiceProof::near;
    for (const StageChoice* other : {&near, greedy ? &*greedy : nullptr}) {
      if (other == nullptr || other->chunks.empty()) continue;
      if (found.chunks.empty() || other->cost < found.cost ||
          (other->cost == found.cost && other->peak < found.peak))
        found = *other;
    }
    found.proof = found.chunks.empty() ? ChoiceProof::cheapest : proof;
    return found;
  }

  StageChoice least_peak() {
    objective_ = Objective::least_peak;
    cut_price_.reset();
    StageChoice least = run(limits_.least_peak_visits);
    if (stopped_) least.proof = ChoiceProof::best_found;
    return least;
  }

  // The least-peak combination `least`, which fits the room the fitting walks stopped short in,
  // made cheaper as the greedy does (a best_found answer).
  StageChoice cheapened_fit(const StageChoice& least) const {
    std::vector<size_t> pick;
    for (size_t v = 0; v < fronts_.size(); ++v)
      pick.push_back(static_cast<size_t>(least.chunks[v] - fronts_[v].data()));
    StageChoice fit = cheapened(std::move(pick));
    fit.proof = ChoiceProof::best_found;
    return fit;
  }

 private:
  enum class Objective { cheapest_fitting, least_peak };

  StageChoice run(int64_t max_visits) {
    found_ = false;
    stopped_ = false;
    visits_ = 0;
    max_visits_ = max_visits;
    best_ = {};
    visit(0, {});
    return best_;
  }

  int64_t peak_of(const std::vector<size_t>& pick) const {
    int64_t peak = 0;
    for (size_t r = 0; r < rows_.forward.size(); ++r) {
      int64_t sum = 0;
      for (size_t v = 0; v < pick.size(); ++v) sum += rows_.term(r, v, fronts_[v][pick[v]]);
      peak = std::max(peak, sum);
    }
    return peak;
  }

  // From each chunk's cheapest candidate, the move of one chunk that lowers the peak at the
  // least price per byte, until the peak fits; then in turn each chunk moved to its cheapest
  // candidate that keeps the peak within the room, until none moves.
  std::optional<StageChoice> greedy_fitting() const {
    std::vector<size_t> pick(fronts_.size(), 0);
    for (size_t v = 0; v < fronts_.size(); ++v)
      for (size_t i = 0; i < fronts_[v].size(); ++i)
        if (fronts_[v][i].cost < fronts_[v][pick[v]].cost) pick[v] = i;
    for (int64_t peak = peak_of(pick); peak > room_;) {
      double best_ratio = 0;
      std::optional<std::pair<size_t, size_t>> move;
      int64_t moved_peak = peak;
      for (size_t v = 0; v < fronts_.size(); ++v) {
        const size_t keep = pick[v];
        for (size_t i = 0; i < fronts_[v].size(); ++i) {
          pick[v] = i;
          const int64_t lower = peak_of(pick);
          if (lower >= peak) continue;
          const double ratio =
              static_cast<double>(fronts_[v][i].cost.price - fronts_[v][keep].cost.price) /
              static_cast<double>(peak - lower);
          if (!move || ratio < best_ratio) best_ratio = ratio, move = {v, i}, moved_peak = lower;
        }
        pick[v] = keep;
      }
      if (!move) return std::nullopt;
      pick[move->first] = move->second;
      peak = moved_peak;
    }
    return cheapened(std::move(pick));
  }

  // `pick`, which fits the room, with each chunk in turn moved to its cheapest candidate that
  // keeps the peak within the room, until none moves.
  StageChoice cheapened(std::vector<size_t> pick) const {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t v = 0; v < fronts_.size(); ++v) {
        const size_t was = pick[v];
        for (size_t i = 0; i < fronts_[v].size(); ++i) {
          if (!(fronts_[v][i].cost < fronts_[v][pick[v]].cost)) continue;
          const size_t keep = pick[v];
          pick[v] = i;
          if (peak_of(pick) > room_) pick[v] = keep;
        }
        moved = moved || pick[v] != was;
      }
    }
    StageChoice choice;
    for (size_t v = 0; v < fronts_.size(); ++v) {
      choice.chunks.push_back(&fronts_[v][pick[v]]);
      choice.cost = choice.cost + fronts_[v][pick[v]].cost;
    }
    choice.peak = peak_of(pick);
    choice.fits = true;
    return choice;
  }

  // Front v's lower convex hull in row r from its cheapest point (least term among the
  // cheapest) towards less memory: that point's term and the steps.
  std::pair<int64_t, std::vector<HullStep>> front_hull(size_t r, size_t v) const {
    std::vector<std::pair<int64_t, int64_t>> points;  // (term, price)
    for (const ChunkCandidate& c : fronts_[v])
      points.emplace_back(rows_.term(r, v, c), c.cost.price);
    std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second < b.second : a.first < b.first;
    });
    const std::pair<int64_t, int64_t> start = points[0];
    // Candidates with less memory than the start, by term descending; the lower hull.
    std::vector<std::pair<int64_t, int64_t>> chain = {start};
    std::vector<std::pair<int64_t, int64_t>> rest;
    for (const auto& p : points)
      if (p.first < start.first) rest.push_back(p);
    std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    // Whether b is on or above the segment from a to c (a, b, c by falling term), compared
    // exactly: the slope a->b is at least the slope b->c.
    auto not_below = [](const std::pair<int64_t, int64_t>& a, const std::pair<int64_t, int64_t>& b,
                        const std::pair<int64_t, int64_t>& c) {
      __extension__ typedef __int128 Wide;
      return static_cast<Wide>(b.second - a.second) * (b.first - c.first) >=
             static_cast<Wide>(c.second - b.second) * (a.first - b.first);
    };
    for (const auto& p : rest) {
      if (p.first == chain.back().first) continue;  // the cheaper of equal terms came first
      while (chain.size() >= 2 && not_below(chain[chain.size() - 2], chain.back(), p))
        chain.pop_back();
      chain.push_back(p);
    }
    std::vector<HullStep> steps;
    for (size_t i = 1; i < chain.size(); ++i) {
      const int64_t saved = chain[i - 1].first - chain[i].first;
      const int64_t price = std::max<int64_t>(0, chain[i].second - chain[i - 1].second);
      steps.push_back({static_cast<double>(price) / static_cast<double>(saved), saved, price});
    }
    return {start.first, steps};
  }

  // The least price chunks [v, V) can add so that every row fits the room (the largest of the
  // rows' relaxations); nullopt when some row cannot fit at all.
  std::optional<double> rest_price(size_t v) const {
    double bound = 0;
    for (size_t r = 0; r < rows_.forward.size(); ++r) {
      const int64_t over = partial_[v][r] + cheapest_term_[r][v] - room_;
      if (over <= 0) continue;
      // The step that completes the saving: the first whose steps up to it save `over`.
      const std::vector<HullStep>& steps = steps_[r][v];
      const auto last = std::partition_point(steps.begin(), steps.end(), [&](const HullStep& s) {
        return s.saved_before + s.saved < over;
      });
      if (last == steps.end()) return std::nullopt;
      bound = std::max(bound, static_cast<double>(last->price_before) +
                                  static_cast<double>(last->price) *
                                      static_cast<double>(over - last->saved_before) /
                                      static_cast<double>(last->saved));
    }
    return static_cast<double>(rest_cost_[v].price) + bound;
  }

  int64_t peak_bound(size_t v) const {
    int64_t peak = 0;
    for (size_t r = 0; r < rows_.forward.size(); ++r)
      peak = std::max(peak, partial_[v][r] + least_term_[r][v]);
    return peak;
  }

  // Whether a combination of cost at least `cost` and peak at least `peak` could be kept.
  bool could_improve(const RecomputeCost& cost, int64_t peak) const {
    if (objective_ == Objective::least_peak) return !found_ || peak < best_.peak;
    if (peak > room_) return false;
    if (!found_) return true;
    return cost < best_.cost || (cost == best_.cost && peak < best_.peak);
  }

  // Whether chunks [v, V), picked after `cost`, could hold a combination worth keeping.
  bool worth_visiting(size_t v, const RecomputeCost& cost) {
    if (!could_improve(cost + rest_cost_[v], peak_bound(v))) return false;
    if (objective_ == Objective::least_peak || v == fronts_.size()) return true;
    const std::optional<double> rest = rest_price(v);
    if (!rest) return false;
    // Prices are whole: the relaxation's price rounds up, less a hair for the sums' rounding.
    const auto least = static_cast<int64_t>(std::ceil(*rest * (1 - 1e-9) - 1e-6)) + cost.price;
    // Exactly: nothing cheaper than a price reached. Near: nothing cheaper by more than the gap.
    const auto beats = [&](int64_t price) {
      return gap_ == 0 ? least <= price
                       : static_cast<double>(least) < static_cast<double>(price) * (1 - gap_);
    };
    if (found_ && !beats(best_.cost.price)) return false;
    return !(cut_price_ && !beats(*cut_price_));
  }

  // Chunks [0, v) are picked (pick_, partial_[v]) at `cost`.
  void visit(size_t v, const RecomputeCost& cost) {
    if (stopped_) return;
    if (++visits_ > max_visits_) {
      stopped_ = true;
      return;
    }
    if (v == fronts_.size()) {
      const int64_t here = peak_bound(v);  // every term picked: the peak itself
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
      pick_[v] = i;
      for (size_t r = 0; r < rows_.forward.size(); ++r)
        partial_[v + 1][r] = partial_[v][r] + rows_.term(r, v, c);
      if (worth_visiting(v + 1, cost + c.cost)) visit(v + 1, cost + c.cost);
    }
  }

  const std::vector<std::vector<ChunkCandidate>>& fronts_;
  const PeakRows rows_;
  const ChoiceLimits limits_;
  std::vector<size_t> pick_;
  std::vector<std::vector<int64_t>> partial_;              // [v][row]: chunks [0, v)'s terms
  std::vector<std::vector<int64_t>> least_term_;           // [row][v]: chunks [v, V)'s least terms
  std::vector<std::vector<int64_t>> cheapest_term_;        // [row][v]: their cheapest points' terms
  std::vector<std::vector<std::vector<HullStep>>> steps_;  // [row][v]: their hulls' steps, merged
  // [v]: the least cost of chunks v.. together (its price: the least price, costs being ordered
  // by price first)
  std::vector<RecomputeCost> rest_cost_;
  Objective objective_ = Objective::cheapest_fitting;
  int64_t room_ = 0;
  std::optional<int64_t> cut_price_;
  bool found_ = false;
  double gap_ = 0;  // 0: exact; else cut what cannot beat a price by more than this share
  bool stopped_ = false;
  int64_t visits_ = 0;
  int64_t max_visits_ = 0;
  StageChoice best_;
};

}  // namespace

std::string describe_proof(ChoiceProof proof) {
  if (proof == ChoiceProof::cheapest) return "";
  return "the interleaved chunks' combination is " +
         (proof == ChoiceProof::near
              ? TRAINER_STR("within " << kNearGap * 100 << "% of the cheapest recompute price")
              : std::string("the best found within the searches' limits")) +
         " (the exact search stopped at its limit)";
}

std::vector<std::string> stage_proof_lines(const std::vector<ChoiceProof>& proofs) {
  std::vector<std::string> lines;
  for (size_t stage = 0; stage < proofs.size(); ++stage)
    if (proofs[stage] != ChoiceProof::cheapest)
      lines.push_back("stage " + std::to_string(stage) + ": " + describe_proof(proofs[stage]));
  return lines;
}

StageChoice choose_stage_combination(const std::vector<std::vector<ChunkCandidate>>& fronts,
                                     const std::vector<parallel::ScheduleOp>& ops, int64_t room,
                                     const ChoiceLimits& limits) {
  for (const auto& front : fronts)
    if (front.empty()) return {};
  Search search(fronts, ops, limits);
  StageChoice choice = search.cheapest_fitting(room);
  if (!choice.chunks.empty()) {
    choice.fits = true;
    return choice;
  }
  const StageChoice least = search.least_peak();
  // A fitting walk that ends finds every fit; one that stopped (and a greedy that stuck) may not.
  if (least.chunks.empty() || least.peak > room) return least;
  return search.cheapened_fit(least);
}

}  // namespace trainer
