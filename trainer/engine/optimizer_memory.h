// Predicted bytes of one rank in the allocator categories the optimizer owns: `grad` (the fp32
// gradients), `optimizer` (moments, and a bf16 run's fp32 master weights; a part of each
// bucket under optimizer.distributed) and `comm` (the staging of the tail bucket, Note
// [Gradient buckets]). Pure: sizes only, nothing allocated; the whole-rank memory model adds
// these to the other users of `comm` (pipeline sends).
#pragma once

#include <cstdint>

#include "model/gpt_params.h"
#include "parallel/pipeline/grad_buckets.h"
#include "trainer/config/config.h"

namespace trainer {

// The buckets of the gradient reduction (optimizer.bucket_mb) over `numel` gradients.
parallel::GradBucketLayout grad_bucket_layout(const Config& config, int64_t numel, int64_t dp_size,
                                              int64_t dp_rank);

struct OptimizerMemory {
  int64_t grad = 0;       // bytes, current and peak during a step
  int64_t optimizer = 0;  // bytes, current and peak during a step
  int64_t comm = 0;       // bytes the trainer's allocator holds in `comm` for the optimizer
};

// For the rank at data-parallel position `dp_rank` of `dp_size` holding `shard` of
// config.model (the parameters its Trainer allocates).
OptimizerMemory predict_optimizer_memory(const Config& config, const model::ModelShard& shard,
                                         int64_t dp_size, int64_t dp_rank);

}  // namespace trainer
