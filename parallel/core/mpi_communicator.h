// Communicator over an MPI communicator (host buffers; device tensors are staged through
// host memory by the tensor methods). Owns the MPI_Comm.
#pragma once

#include "parallel/core/communicator.h"

namespace parallel {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (an MPI_Comm passed as its integer/pointer handle).
  explicit MpiCommunicator(void* comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  using Communicator::all_gather;
  using Communicator::all_reduce_sum;
  using Communicator::all_reduce_max;
  using Communicator::recv;
  using Communicator::reduce_scatter;
  using Communicator::send_async;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // bf16 sums use a user-defined MPI operation that adds in f32 and rounds to bf16.
  void all_reduce_sum(void* data, int64_t count, runtime::DType dtype) override;
  void all_reduce_sum(double* data, int64_t count) override;
  void all_reduce_max(float* data, int64_t count) override;
  void all_gather(void* out, const void* in, int64_t count, runtime::DType dtype) override;
  void reduce_scatter(void* out, const void* in, int64_t count, runtime::DType dtype) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Request> send_async(const void* data, int64_t bytes, int peer, int tag) override;
  void recv(void* data, int64_t bytes, int peer, int tag) override;

 private:
  void* comm_;  // MPI_Comm (OpenMPI: a pointer)
  int rank_ = 0, size_ = 1;
};

}  // namespace parallel
