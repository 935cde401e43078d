// After a step's backward: the gradient reductions every layout needs, in order
// (sequence-parallel partials over tp, tied word embeddings over the first and
// last stage, the average over dp bucket by bucket), and the global gradient norm that counts
// tensor-parallel replicas and the tied copy once; and the distributed optimizer's
// bucket-wise reduce-scatter of gradients and all-gather of weights.
#pragma once

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "parallel/pipeline/grad_buckets.h"

namespace parallel {

// The reductions inside one model replica (sequence-parallel partials, tied embeddings), which
// precede the data-parallel one.
void reduce_model_parallel_gradients(ProcessGroups& groups, const model::GptParams& grads,
                                     bool sequence_parallel);

// Distributed optimizer (Note [Gradient buckets]): bucket `bucket` of `grads` (the flat
// buffer) summed over dp into its owners' parts, each averaged by its owner. `staging`: dp f32
// elements on grads' device, for the staged bucket.
void reduce_scatter_bucket(Communicator& dp, const GradBucketLayout& layout,
                           const GradBucket& bucket, const runtime::Tensor& grads,
                           const runtime::Tensor& staging);
// The owners' parts of bucket `bucket` of `flat` (weights, any dtype) copied to every rank;
// `staging`: dp elements of flat's dtype and device, for the staged bucket.
void all_gather_bucket(Communicator& dp, const GradBucketLayout& layout, const GradBucket& bucket,
                       const runtime::Tensor& flat, const runtime::Tensor& staging);
// The replicated optimizer's average over dp of bucket `bucket`: reduce_scatter_bucket, then
// all_gather_bucket of the averaged parts, so every element is summed as the distributed
// optimizer sums it (the two agree bit for bit). `staging`: as reduce_scatter_bucket's.
void all_reduce_bucket(Communicator& dp, const GradBucketLayout& layout, const GradBucket& bucket,
                       const runtime::Tensor& grads, const runtime::Tensor& staging);

// sqrt(sum of squares of every gradient of the whole model), on every rank.
// The tied word embeddings count on the first stage only. With `owned` (the distributed
// optimizer's ranges of this rank) only those elements count here and the sum runs over the
// world, which holds each element in exactly one owner; else over tp x pp.
double global_grad_norm(ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage, const std::vector<FlatRange>* owned = nullptr);

}  // namespace parallel
