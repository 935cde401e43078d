// The stage's choice across its chunks (Note [Stage choice]): the branch and bound returns
// exactly what trying every combination in order returns, on interleaved and 1F1B op lists, and
// stays fast where the combinations number millions.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <vector>

#include "parallel/pipeline/schedules.h"
#include "trainer/planning/stage_choice.h"

namespace trainer {
namespace {

// Every combination, the last chunk fastest; kept when strictly better (the planner's rule).
StageChoice brute_force(const std::vector<std::vector<ChunkCandidate>>& fronts,
                        const std::vector<parallel::ScheduleOp>& ops, int64_t room) {
  StageChoice best, smallest;
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
    if (here.peak <= room && (!best.fits || better)) best = here, best.fits = true;
    more = false;
    for (size_t v = fronts.size(); v-- > 0;) {
      if (++pick[v] < fronts[v].size()) {
        more = true;
        break;
      }
      pick[v] = 0;
    }
  }
  return best.fits ? best : smallest;
}

// A front of `size` candidates: cost falls as memory grows, with noise so that some are not on
// a clean trade-off, and ties in cost and in memory.
std::vector<ChunkCandidate> random_front(std::mt19937& rng, int size) {
  std::uniform_int_distribution<int64_t> bytes(1, 40), price(0, 6);
  std::vector<ChunkCandidate> front;
  for (int i = 0; i < size; ++i) {
    ChunkCandidate c;
    c.forward_end = bytes(rng) * 100;
    c.backward_peak = c.forward_end / 2 + bytes(rng) * 50;
    c.cost = {price(rng) * 10 + (40 - c.forward_end / 100), bytes(rng)};
    front.push_back(c);
  }
  return front;
}

TEST(StageChoice, EqualsTryingEveryCombination) {
  std::mt19937 rng(7);
  int compared = 0, fitting = 0;
  for (const parallel::ScheduleKind kind :
       {parallel::ScheduleKind::one_f_one_b, parallel::ScheduleKind::interleaved}) {
    for (int64_t chunks : {1, 2, 3}) {
      if (kind == parallel::ScheduleKind::one_f_one_b && chunks > 1) continue;
      for (int64_t stage : {0, 3}) {
        const auto ops = parallel::schedule_ops(kind, 4, stage, chunks, 8);
        for (int trial = 0; trial < 40; ++trial) {
          std::vector<std::vector<ChunkCandidate>> fronts;
          for (int64_t v = 0; v < chunks; ++v)
            fronts.push_back(random_front(rng, 1 + static_cast<int>(rng() % 7)));
          const int64_t least = brute_force(fronts, ops, -1).peak;
          for (const int64_t room :
               {int64_t{-1}, least - 1, least, least + 500, least * 2, int64_t{1} << 40}) {
            const StageChoice expected = brute_force(fronts, ops, room);
            const StageChoice got = choose_stage_combination(fronts, ops, room);
            ASSERT_EQ(got.fits, expected.fits) << "room " << room;
            ASSERT_EQ(got.chunks, expected.chunks) << "room " << room << " trial " << trial;
            EXPECT_EQ(got.cost, expected.cost);
            EXPECT_EQ(got.peak, expected.peak);
            ++compared;
            fitting += got.fits;
          }
        }
      }
    }
  }
  EXPECT_GT(fitting, compared / 2);
  EXPECT_LT(fitting, compared);  // both branches are exercised
}

// vp 4 with fronts of 40: 2.56 million combinations, which the bounds cut to a few.
TEST(StageChoice, DeepInterleavingIsFast) {
  std::mt19937 rng(11);
  const auto ops = parallel::schedule_ops(parallel::ScheduleKind::interleaved, 4, 1, 4, 16);
  std::vector<std::vector<ChunkCandidate>> fronts;
  for (int v = 0; v < 4; ++v) fronts.push_back(random_front(rng, 40));
  const int64_t least = choose_stage_combination(fronts, ops, -1).peak;
  const auto start = std::chrono::steady_clock::now();
  const StageChoice choice = choose_stage_combination(fronts, ops, least * 3 / 2);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(choice.fits);
  EXPECT_EQ(choice.proof, ChoiceProof::cheapest);
  EXPECT_LT(seconds, 1.0);
}

// Past the exact walk's limit the near walk's answer is within kNearGap of the cheapest, and
// past both the greedy's still fits; the brute force says what the cheapest is.
TEST(StageChoice, PastItsLimitSettlesNearTheCheapest) {
  std::mt19937 rng(5);
  const auto ops = parallel::schedule_ops(parallel::ScheduleKind::interleaved, 4, 0, 3, 8);
  int near = 0, best_found = 0;
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<std::vector<ChunkCandidate>> fronts;
    for (int v = 0; v < 3; ++v) fronts.push_back(random_front(rng, 12));
    const int64_t least = brute_force(fronts, ops, -1).peak;
    for (const int64_t room : {least + 500, least * 3 / 2, least * 2}) {
      const StageChoice cheapest = brute_force(fronts, ops, room);
      ASSERT_TRUE(cheapest.fits);
      const StageChoice settled =
          choose_stage_combination(fronts, ops, room, {.exact_visits = 3, .near_visits = 1 << 20});
      ASSERT_TRUE(settled.fits);
      EXPECT_LE(settled.peak, room);
      if (settled.proof == ChoiceProof::cheapest) {
        EXPECT_EQ(settled.chunks, cheapest.chunks);
        continue;
      }
      ASSERT_EQ(settled.proof, ChoiceProof::near);
      ++near;
      EXPECT_LE(static_cast<double>(settled.cost.price) * (1 - kNearGap),
                static_cast<double>(cheapest.cost.price));
      const StageChoice stopped =
          choose_stage_combination(fronts, ops, room, {.exact_visits = 3, .near_visits = 3});
      ASSERT_TRUE(stopped.fits);
      EXPECT_LE(stopped.peak, room);
      EXPECT_LE(cheapest.cost, stopped.cost);
      best_found += stopped.proof == ChoiceProof::best_found;
    }
  }
  EXPECT_GT(near, 20);
  EXPECT_GT(best_found, 10);
}

// At the tightest rooms (the least peak itself, or a little above it) the greedy can stop short
// of fitting, and walks cut off at a few visits find no fit of their own: what fits is still
// found (the least-peak walk's answer), never "does not fit" where a combination fits.
TEST(StageChoice, WalksCutShortStillFindWhatFits) {
  std::mt19937 rng(9);
  int tightest = 0;
  for (const int64_t chunks : {2, 3}) {
    const auto ops = parallel::schedule_ops(parallel::ScheduleKind::interleaved, 4, 0, chunks, 8);
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<std::vector<ChunkCandidate>> fronts;
      for (int64_t v = 0; v < chunks; ++v) fronts.push_back(random_front(rng, 12));
      const int64_t least = brute_force(fronts, ops, -1).peak;
      for (const int64_t room : {least, least + 100, least + 300}) {
        const StageChoice cut =
            choose_stage_combination(fronts, ops, room, {.exact_visits = 2, .near_visits = 2});
        ASSERT_TRUE(cut.fits) << "room " << room << ", least peak " << least;
        EXPECT_LE(cut.peak, room);
        tightest += room == least && cut.proof == ChoiceProof::best_found;
      }
    }
  }
  EXPECT_GT(tightest, 10);
}

// A front like the chunk search's on a stage of like layers: price falls almost linearly as
// memory grows, so that many combinations price within a hair of each other.
std::vector<ChunkCandidate> near_linear_front(std::mt19937& rng, int size) {
  std::uniform_int_distribution<int64_t> noise(0, 30);
  std::vector<ChunkCandidate> front;
  for (int i = 0; i < size; ++i) {
    ChunkCandidate c;
    c.forward_end = 1000 + 50 * i + noise(rng);
    c.backward_peak = c.forward_end / 2 + 10 * noise(rng);
    c.cost = {100000 - 2000 * i + noise(rng), noise(rng)};
    front.push_back(c);
  }
  return front;
}

// vp 8, every chunk with the same near-linear front of 40 on tight rooms: the exact walk gives
// up (40^8 combinations), the near walk ends, and its answer fits.
TEST(StageChoice, EightChunksOfLikeFrontsEnd) {
  std::mt19937 rng(3);
  const auto ops = parallel::schedule_ops(parallel::ScheduleKind::interleaved, 2, 0, 8, 16);
  const std::vector<std::vector<ChunkCandidate>> fronts(8, near_linear_front(rng, 40));
  const int64_t least = choose_stage_combination(fronts, ops, -1).peak;
  int near = 0;
  for (const int64_t room : {least * 5 / 4, least * 3 / 2, least * 2}) {
    const StageChoice choice = choose_stage_combination(fronts, ops, room);
    EXPECT_TRUE(choice.fits);
    EXPECT_LE(choice.peak, room);
    EXPECT_NE(choice.proof, ChoiceProof::best_found) << "room " << room;
    near += choice.proof == ChoiceProof::near;
  }
  EXPECT_GT(near, 0);
}

}  // namespace
}  // namespace trainer
