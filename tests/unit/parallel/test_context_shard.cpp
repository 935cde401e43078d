// Note [Context chunks]: every position of the sequence is held by exactly one cp rank, each
// rank's rows are its two chunks in order, runs of rows split where the chunks meet, and the
// causal work (keys at or before each query) is the same on every rank.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/core/context_shard.h"

namespace {

using parallel::ContextShard;
using parallel::RowSegment;

TEST(ContextShard, EveryPositionHasOneHolder) {
  for (const int64_t cp : {1, 2, 3, 4, 8}) {
    const int64_t T = 2 * cp * 5;
    std::vector<int> held(static_cast<size_t>(T), 0);
    for (int64_t rank = 0; rank < cp; ++rank) {
      const ContextShard shard{cp, rank, T};
      for (int64_t row = 0; row < shard.local_seq(); ++row) ++held[shard.position(row)];
    }
    for (int64_t p = 0; p < T; ++p) EXPECT_EQ(held[static_cast<size_t>(p)], 1) << cp << " " << p;
  }
}

TEST(ContextShard, RankHoldsChunkRankThenItsMirror) {
  const ContextShard shard{4, 1, 32};  // 8 chunks of 4: rank 1 holds chunks 1 and 6
  EXPECT_EQ(shard.chunk(), 4);
  EXPECT_EQ(shard.local_seq(), 8);
  const std::vector<int64_t> expected = {4, 5, 6, 7, 24, 25, 26, 27};
  for (int64_t row = 0; row < 8; ++row) EXPECT_EQ(shard.position(row), expected[row]);
  EXPECT_EQ(shard.chunk_position(3, 0), 12);
  EXPECT_EQ(shard.chunk_position(3, 1), 16);
}

TEST(ContextShard, SegmentsSplitWhereTheChunksMeet) {
  const ContextShard shard{2, 0, 16};  // chunks of 4: rank 0 holds positions 0-3 and 12-15
  const std::vector<RowSegment> across = shard.segments(2, 4);
  ASSERT_EQ(across.size(), 2u);
  EXPECT_EQ(across[0].row, 2);
  EXPECT_EQ(across[0].position, 2);
  EXPECT_EQ(across[0].rows, 2);
  EXPECT_EQ(across[1].row, 4);
  EXPECT_EQ(across[1].position, 12);
  EXPECT_EQ(across[1].rows, 2);
  const std::vector<RowSegment> inside = shard.segments(5, 3);
  ASSERT_EQ(inside.size(), 1u);
  EXPECT_EQ(inside[0].position, 13);
  // Without context parallelism the rows are the positions, in one run.
  const std::vector<RowSegment> whole = ContextShard{1, 0, 15}.segments(3, 12);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].position, 3);
  EXPECT_EQ(whole[0].rows, 12);
}

TEST(ContextShard, CausalWorkIsEqualOnEveryRank) {
  const int64_t cp = 4, T = 64;
  std::vector<int64_t> work;
  for (int64_t rank = 0; rank < cp; ++rank) {
    const ContextShard shard{cp, rank, T};
    int64_t pairs = 0;  // (query, key) pairs with key <= query
    for (int64_t row = 0; row < shard.local_seq(); ++row) pairs += shard.position(row) + 1;
    work.push_back(pairs);
  }
  for (int64_t rank = 1; rank < cp; ++rank) EXPECT_EQ(work[rank], work[0]) << rank;
}

}  // namespace
