// The gradient bucket layout (Note [Gradient buckets]): buckets tile the flat buffer from its
// end, every length but the tail's divides by dp, the ranks' parts tile each bucket, and every
// rank's shard is the same size, 1/dp of the buffer within the tail's padding.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/pipeline/grad_buckets.h"

namespace {

using parallel::GradBucketLayout;
using parallel::plan_grad_buckets;

TEST(GradBuckets, TileTheBufferFromItsEnd) {
  const GradBucketLayout layout =
      plan_grad_buckets({.numel = 103, .bucket_numel = 30, .dp_size = 4, .dp_rank = 1});
  // 32-element buckets (30 rounded up to a multiple of 4) from the end, then 4 of 7 and 3.
  std::vector<std::vector<int64_t>> expected = {
      {71, 32, 32, 0}, {39, 32, 32, 8}, {7, 32, 32, 16}, {3, 4, 4, 24}, {0, 3, 4, 25}};
  ASSERT_EQ(layout.buckets.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const parallel::GradBucket& b = layout.buckets[i];
    EXPECT_EQ((std::vector<int64_t>{b.begin, b.length, b.padded_length, b.shard_offset}),
              expected[i])
        << "bucket " << i;
  }
  EXPECT_EQ(layout.shard_numel, 26);  // ceil(103 / 4)
  EXPECT_TRUE(layout.buckets.back().staged());
  EXPECT_TRUE(layout.has_staged_bucket());
}

TEST(GradBuckets, PartsOfTheRanksTileEveryBucketOnce) {
  for (int64_t dp : {1, 2, 3, 4, 8}) {
    for (int64_t bucket_numel : {0, 1, 5, 64}) {
      const int64_t numel = 211;
      std::vector<int> owners(numel, 0);
      int64_t shard = -1;
      for (int64_t rank = 0; rank < dp; ++rank) {
        const GradBucketLayout layout = plan_grad_buckets(
            {.numel = numel, .bucket_numel = bucket_numel, .dp_size = dp, .dp_rank = rank});
        if (shard < 0) shard = layout.shard_numel;
        EXPECT_EQ(layout.shard_numel, shard) << "every rank's shard is one size";
        EXPECT_LT(layout.shard_numel * dp - numel, dp) << "padding under one element per rank";
        for (const parallel::FlatRange& range : layout.owned_ranges()) {
          for (int64_t i = range.begin; i < range.end; ++i) ++owners[static_cast<size_t>(i)];
        }
      }
      for (int64_t i = 0; i < numel; ++i)
        ASSERT_EQ(owners[static_cast<size_t>(i)], 1) << "element " << i << ", dp " << dp;
    }
  }
}

TEST(GradBuckets, OneBucketWhenNoSizeIsGiven) {
  const GradBucketLayout layout = plan_grad_buckets({.numel = 96, .dp_size = 4, .dp_rank = 3});
  ASSERT_EQ(layout.buckets.size(), 1u);
  EXPECT_FALSE(layout.has_staged_bucket());
  EXPECT_EQ(layout.owned(layout.buckets[0]).begin, 72);
  EXPECT_EQ(layout.owned(layout.buckets[0]).end, 96);
  EXPECT_EQ(parallel::bucket_numel_of_mb(1.0), 262144);
}

}  // namespace
