// The four tensor/sequence-parallel mapping pairs over a Communicator.
#include "parallel/mappings.h"

namespace parallel {

void copy_to_tp_backward(Communicator& tp, float* grad, int64_t count) {
  tp.all_reduce_sum(grad, count);
}

void reduce_from_tp_forward(Communicator& tp, float* data, int64_t count) {
  tp.all_reduce_sum(data, count);
}

void gather_from_sp_forward(Communicator& tp, float* full, const float* shard, int64_t shard_count) {
  tp.all_gather(full, shard, shard_count);
}

void gather_from_sp_backward(Communicator& tp, float* dshard, const float* dfull,
                             int64_t shard_count) {
  tp.reduce_scatter(dshard, dfull, shard_count);
}

void reduce_scatter_to_sp_forward(Communicator& tp, float* shard, const float* partial_full,
                                  int64_t shard_count) {
  tp.reduce_scatter(shard, partial_full, shard_count);
}

void reduce_scatter_to_sp_backward(Communicator& tp, float* dfull, const float* dshard,
                                   int64_t shard_count) {
  tp.all_gather(dfull, dshard, shard_count);
}

}  // namespace parallel
