// The four tensor/sequence-parallel mapping pairs over a Communicator.
#include "parallel/core/mappings.h"

namespace parallel {

void copy_to_tp_backward(Communicator& tp, const Tensor& grad) {
  tp.all_reduce_sum(grad);
}

void reduce_from_tp_forward(Communicator& tp, const Tensor& data) {
  tp.all_reduce_sum(data);
}

void gather_from_sp_forward(Communicator& tp, const Tensor& full, const Tensor& shard) {
  tp.all_gather(full, shard);
}

void gather_from_sp_backward(Communicator& tp, const Tensor& dshard, const Tensor& dfull) {
  tp.reduce_scatter(dshard, dfull);
}

void reduce_scatter_to_sp_forward(Communicator& tp, const Tensor& shard,
                                  const Tensor& partial_full) {
  tp.reduce_scatter(shard, partial_full);
}

void reduce_scatter_to_sp_backward(Communicator& tp, const Tensor& dfull, const Tensor& dshard) {
  tp.all_gather(dfull, dshard);
}

}  // namespace parallel
