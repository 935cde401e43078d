// Buckets of the data-parallel gradient reduction over the flat gradient buffer, and each
// rank's part of every bucket under the distributed optimizer (Note [Gradient buckets]). The
// layout is a pure function of sizes, shared by the reduction, the optimizer and the models.
#pragma once

#include <cstdint>
#include <vector>

namespace parallel {

// Note [Gradient buckets]
// Buckets are cut from the end of the flat buffer (backward produces gradients from the last
// layer on), in that order, `bucket_numel` elements each rounded up to a multiple of the dp
// size; the remainder at the start of the buffer is the last bucket. A bucket's length divides
// by dp, so dp rank r owns chunk r of it and the reduce-scatter and all-gather run in place on
// the flat buffers. Only when the whole buffer does not divide by dp, its first length % dp
// (< dp) elements form a tail bucket padded to dp elements, which travels through a staging
// buffer of dp elements. Every rank's shard holds padded_length / dp elements of each bucket,
// in bucket order: the shard is the same size on every rank, padding included.

struct GradBucket {
  int64_t begin = 0;          // first element in the flat buffer
  int64_t length = 0;         // elements of the flat buffer it covers
  int64_t padded_length = 0;  // a multiple of dp; > length only for the staged tail bucket
  int64_t shard_offset = 0;   // where a rank's part of it starts in its shard
  bool staged() const { return padded_length != length; }
};

// [begin, end) in the flat buffer.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
};

struct GradBucketArgs {
  int64_t numel = 0;         // elements of the flat gradient buffer
  int64_t bucket_numel = 0;  // elements per bucket; 0: one bucket
  int64_t dp_size = 1;
  int64_t dp_rank = 0;
};

struct GradBucketLayout {
  std::vector<GradBucket> buckets;  // in reduction order
  int64_t dp_size = 1, dp_rank = 0;
  int64_t shard_numel = 0;  // every rank's shard: the sum of padded_length / dp

  int64_t part_length(const GradBucket& bucket) const { return bucket.padded_length / dp_size; }
  // This rank's part of `bucket` in the flat buffer, clipped to the elements the bucket covers
  // (empty for a rank that owns only padding).
  FlatRange owned(const GradBucket& bucket) const;
  // owned() of every bucket, in bucket order.
  std::vector<FlatRange> owned_ranges() const;
  bool has_staged_bucket() const;
};

GradBucketLayout plan_grad_buckets(const GradBucketArgs& args);

// optimizer.bucket_mb as elements of fp32 gradient (0 stays 0: one bucket).
int64_t bucket_numel_of_mb(double bucket_mb);

}  // namespace parallel
