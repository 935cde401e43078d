// The bucket layout (Note [Gradient buckets]).
#include "parallel/pipeline/grad_buckets.h"

#include <algorithm>

#include "runtime/error.h"

namespace parallel {

FlatRange GradBucketLayout::owned(const GradBucket& bucket) const {
  const int64_t part = part_length(bucket);
  const int64_t end = bucket.begin + bucket.length;
  const int64_t first = std::min(bucket.begin + dp_rank * part, end);
  return {first, std::min(first + part, end)};
}

std::vector<FlatRange> GradBucketLayout::owned_ranges() const {
  std::vector<FlatRange> ranges;
  for (const GradBucket& bucket : buckets) ranges.push_back(owned(bucket));
  return ranges;
}

bool GradBucketLayout::has_staged_bucket() const {
  return std::any_of(buckets.begin(), buckets.end(),
                     [](const GradBucket& bucket) { return bucket.staged(); });
}

GradBucketLayout plan_grad_buckets(const GradBucketArgs& args) {
  TRAINER_ASSERT(args.numel >= 0 && args.bucket_numel >= 0 && args.dp_size >= 1 &&
                     args.dp_rank >= 0 && args.dp_rank < args.dp_size,
                 "bucket layout of " << args.numel << " elements, buckets of " << args.bucket_numel
                                     << ", dp rank " << args.dp_rank << " of " << args.dp_size);
  GradBucketLayout layout;
  layout.dp_size = args.dp_size;
  layout.dp_rank = args.dp_rank;
  const int64_t dp = args.dp_size;
  const int64_t tail = args.numel % dp;  // the staged bucket's elements
  const int64_t requested = args.bucket_numel > 0 ? args.bucket_numel : args.numel;
  const int64_t bucket = std::max<int64_t>((requested + dp - 1) / dp * dp, dp);
  auto add = [&](int64_t begin, int64_t length, int64_t padded_length) {
    layout.buckets.push_back({begin, length, padded_length, layout.shard_numel});
    layout.shard_numel += padded_length / dp;
  };
  for (int64_t end = args.numel; end > tail;) {
    const int64_t length = std::min(bucket, end - tail);
    add(end - length, length, length);
    end -= length;
  }
  if (tail > 0) add(0, tail, dp);
  return layout;
}

int64_t bucket_numel_of_mb(double bucket_mb) {
  constexpr double kBytesPerMb = 1024.0 * 1024.0, kGradBytes = 4.0;  // fp32 gradients
  return static_cast<int64_t>(bucket_mb * kBytesPerMb / kGradBytes);
}

}  // namespace parallel
