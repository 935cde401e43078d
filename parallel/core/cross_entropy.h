// The vocab-parallel cross entropy's forward (Megatron's tensor_parallel/cross_entropy.py): each
// tensor-parallel rank holds the logits of its vocabulary shard; the row maxima, the sums of
// exponentials and the target logits are reduced over the group between the shard-local
// kernels (runtime/ops.h's vocab_shard_*), so no rank gathers the whole vocabulary. Its backward
// is local (the lse and the targets are known on every rank).
#pragma once

#include <cstdint>

#include "parallel/core/communicator.h"

namespace parallel {

struct VocabParallelCrossEntropy {
  runtime::Tensor losses;   // [rows] f32: each row's loss (ignored targets: 0)
  runtime::Tensor lse;      // [rows] f32: each row's log-sum-exp over the whole vocabulary
  runtime::Tensor row_max;  // [rows] f32 workspace: the rows' maxima over the whole vocabulary
  runtime::Tensor logits;   // [rows, shard_cols]: this rank's shard
  runtime::Tensor targets;  // [rows] i32, global ids
  int64_t rows = 0;
  int64_t vocab_start = 0;  // the shard's first id
  int64_t real_cols = 0;    // the shard's ids below the real vocabulary (the rest is padding)
  int64_t shard_cols = 0;
};

// losses and lse of the rows, the same on every rank of `tp` (three all-reduces).
void vocab_parallel_cross_entropy_forward(Communicator& tp, const VocabParallelCrossEntropy& ce);

}  // namespace parallel
