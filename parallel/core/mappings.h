// Tensor- and sequence-parallel region boundaries as forward/backward pairs
// (Megatron's mappings.py). Activations are [s, b, h] row-major, so a sequence
// shard is a contiguous block of rows and gathers/scatters are plain collectives.
//   copy_to_tp            forward: identity         backward: all-reduce
//   reduce_from_tp        forward: all-reduce       backward: identity
//   gather_from_sp        forward: all-gather       backward: reduce-scatter
//   reduce_scatter_to_sp  forward: reduce-scatter   backward: all-gather
// Each function below is the non-identity half; the identity halves need no call.
// With a group of one every function is a copy (or nothing).
#pragma once

#include <cstdint>

#include "parallel/core/communicator.h"

namespace parallel {

// Tensors of any device and of the activation dtype; shards are contiguous blocks of rows.
using runtime::Tensor;

// copy_to_tp backward: the input gradient summed over the group, in place.
void copy_to_tp_backward(Communicator& tp, const Tensor& grad);
// reduce_from_tp forward: partial sums of a row-parallel output summed, in place.
void reduce_from_tp_forward(Communicator& tp, const Tensor& data);
// gather_from_sp forward: full (size x shard) from every rank's shard.
void gather_from_sp_forward(Communicator& tp, const Tensor& full, const Tensor& shard);
// gather_from_sp backward: dshard = this rank's chunk of the summed dfull.
void gather_from_sp_backward(Communicator& tp, const Tensor& dshard, const Tensor& dfull);
// reduce_scatter_to_sp forward: shard = this rank's chunk of the summed partial_full.
void reduce_scatter_to_sp_forward(Communicator& tp, const Tensor& shard,
                                  const Tensor& partial_full);
// reduce_scatter_to_sp backward: dfull = every rank's dshard, concatenated.
void reduce_scatter_to_sp_backward(Communicator& tp, const Tensor& dfull, const Tensor& dshard);

}  // namespace parallel
