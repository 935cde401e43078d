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

  int rank() const override { return rank_; }
  int size() const override { return size_; }

 private:
  // bf16 sums use a user-defined MPI operation that adds in f32 and rounds to bf16.
  void do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) override;
  void do_all_reduce_sum_f64_buffer(double* data, int64_t count) override;
  void do_all_reduce_max_buffer(float* data, int64_t count) override;
  void do_all_gather_buffer(void* out, const void* in, int64_t count,
                            runtime::DType dtype) override;
  void do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                runtime::DType dtype) override;
  void do_broadcast(void* data, int64_t bytes, int root) override;
  void do_barrier() override;
  std::unique_ptr<Request> do_send_async_buffer(const void* data, int64_t bytes, int peer,
                                                int tag) override;
  void do_recv_buffer(void* data, int64_t bytes, int peer, int tag) override;

  void* comm_;  // MPI_Comm (OpenMPI: a pointer)
  int rank_ = 0, size_ = 1;
};

}  // namespace parallel
