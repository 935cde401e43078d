// Gradient reductions and the deduplicated global norm.
#include "parallel/pipeline/grad_sync.h"

#include <algorithm>
#include <cmath>

#include "runtime/ops.h"

namespace parallel {

std::unique_ptr<Request> start_reduce_scatter_bucket(Communicator& dp,
                                                     const GradBucketLayout& layout,
                                                     const GradBucket& bucket,
                                                     const runtime::Tensor& grads,
                                                     const runtime::Tensor& staging) {
  const int64_t part = layout.part_length(bucket), rank = layout.dp_rank;
  const runtime::Tensor covered = grads.view(bucket.begin, {bucket.length});
  if (!bucket.staged()) return dp.reduce_scatter_async(covered.view(rank * part, {part}), covered);
  runtime::ops::zero(staging);
  runtime::ops::copy(staging.view(0, {bucket.length}), covered);
  return dp.reduce_scatter_async(staging.view(rank * part, {part}), staging);
}

void finish_reduce_scatter_bucket(Request& request, const GradBucketLayout& layout,
                                  const GradBucket& bucket, const runtime::Tensor& grads,
                                  const runtime::Tensor& staging) {
  request.wait();
  const FlatRange own = layout.owned(bucket);
  const int64_t n = own.end - own.begin;
  if (n == 0) return;
  if (bucket.staged()) {
    const int64_t part = layout.part_length(bucket);
    runtime::ops::copy(grads.view(own.begin, {n}), staging.view(layout.dp_rank * part, {n}));
  }
  runtime::ops::scale_inplace({.x = grads.view(own.begin, {n}),
                               .count = n,
                               .scale = 1.0f / static_cast<float>(layout.dp_size)});
}

std::unique_ptr<Request> start_all_gather_bucket(Communicator& dp, const GradBucketLayout& layout,
                                                 const GradBucket& bucket,
                                                 const runtime::Tensor& flat,
                                                 const runtime::Tensor& staging) {
  const int64_t part = layout.part_length(bucket), rank = layout.dp_rank;
  const runtime::Tensor covered = flat.view(bucket.begin, {bucket.length});
  if (!bucket.staged()) return dp.all_gather_async(covered, covered.view(rank * part, {part}));
  const FlatRange own = layout.owned(bucket);
  if (own.end > own.begin) {
    runtime::ops::copy(staging.view(rank * part, {own.end - own.begin}),
                       flat.view(own.begin, {own.end - own.begin}));
  }
  return dp.all_gather_async(staging, staging.view(rank * part, {part}));
}

void finish_all_gather_bucket(Request& request, const GradBucket& bucket,
                              const runtime::Tensor& flat, const runtime::Tensor& staging) {
  request.wait();
  if (bucket.staged())
    runtime::ops::copy(flat.view(bucket.begin, {bucket.length}), staging.view(0, {bucket.length}));
}

void all_gather_bucket(Communicator& dp, const GradBucketLayout& layout, const GradBucket& bucket,
                       const runtime::Tensor& flat, const runtime::Tensor& staging) {
  const std::unique_ptr<Request> request =
      start_all_gather_bucket(dp, layout, bucket, flat, staging);
  finish_all_gather_bucket(*request, bucket, flat, staging);
}

double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage, const std::vector<FlatRange>* owned) {
  // The counted tensors form runs of the flat buffer (usually one): one reduction per run,
  // as a device reduction synchronizes with the host.
  double sum = 0;
  const bool tp_leader = groups.tp->rank() == 0;
  int64_t offset = 0, run_begin = 0;
  auto add_squares = [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    if (n > 0) sum += runtime::ops::sum_squares({.x = grads.flat.view(begin, {n}), .count = n});
  };
  auto finish_run = [&] {
    if (owned == nullptr) return add_squares(run_begin, offset);
    for (const FlatRange& range : *owned)
      add_squares(std::max(run_begin, range.begin), std::min(offset, range.end));
  };
  for (const model::NamedParam& p : grads.named) {
    const bool counted = (p.shard_dim >= 0 || tp_leader) &&  // tp replicas: one copy counts
                         (!p.roles.tied || has_embedding_stage);
    if (!counted) {
      finish_run();
      run_begin = offset + p.tensor.numel();
    }
    offset += p.tensor.numel();
  }
  finish_run();
  (owned != nullptr ? *groups.world : *groups.model_parallel).all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

}  // namespace parallel
