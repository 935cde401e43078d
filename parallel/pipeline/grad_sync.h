// The data-parallel collectives of one gradient bucket (reduce-scatter of gradients, all-gather
// of averaged gradients or updated weights), each in a start and a finish half; and the global
// gradient norm that counts tensor-parallel replicas and the tied copy once.
#pragma once

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "parallel/pipeline/grad_buckets.h"

namespace parallel {

// One bucket's data-parallel collective in two halves (Note [Gradient buckets]): start_* starts
// it (Note [Non-blocking collectives]), finish_* waits for it and does the local rest. Any
// number of buckets may be in flight; each bucket's staging use is its own (only one bucket
// is staged).
//
// Reduce-scatter: bucket `bucket` of `grads` (the flat buffer) summed over dp into its owners'
// parts, each averaged by its owner. `staging`: dp f32 elements on grads' device, for the
// staged bucket.
std::unique_ptr<Request> start_reduce_scatter_bucket(Communicator& dp,
                                                     const GradBucketLayout& layout,
                                                     const GradBucket& bucket,
                                                     const runtime::Tensor& grads,
                                                     const runtime::Tensor& staging);
void finish_reduce_scatter_bucket(Request& request, const GradBucketLayout& layout,
                                  const GradBucket& bucket, const runtime::Tensor& grads,
                                  const runtime::Tensor& staging);
// All-gather: the owners' parts of bucket `bucket` of `flat` (weights or averaged gradients,
// any dtype) copied to every rank; `staging`: dp elements of flat's dtype and device, for the
// staged bucket. The replicated optimizer averages a bucket over dp as a reduce-scatter then
// an all-gather, so every element is summed as the distributed optimizer sums it (the two agree
// bit for bit).
std::unique_ptr<Request> start_all_gather_bucket(Communicator& dp, const GradBucketLayout& layout,
                                                 const GradBucket& bucket,
                                                 const runtime::Tensor& flat,
                                                 const runtime::Tensor& staging);
void finish_all_gather_bucket(Request& request, const GradBucket& bucket,
                              const runtime::Tensor& flat, const runtime::Tensor& staging);
// Both halves of the all-gather at once.
void all_gather_bucket(Communicator& dp, const GradBucketLayout& layout, const GradBucket& bucket,
                       const runtime::Tensor& flat, const runtime::Tensor& staging);

// sqrt(sum of squares of every gradient of the whole model), on every rank.
// The tied word embeddings count on the first stage only. With `owned` (the distributed
// optimizer's ranges of this rank) only those elements count here and the sum runs over the
// world, which holds each element in exactly one owner; else over tp x pp.
double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage, const std::vector<FlatRange>* owned = nullptr);

}  // namespace parallel
