// Communicator over an MPI communicator (host buffers; device tensors are staged through
// host memory by the tensor methods), blocking and non-blocking. Owns the MPI_Comm.
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
  TRAINER_BUFFER_HOOK_OVERRIDES;
  // MPI_Ireduce_scatter_block and MPI_Iallgather (Note [Non-blocking collectives]).
  std::unique_ptr<Request> do_reduce_scatter_async_buffer(void* out, const void* in, int64_t count,
                                                          runtime::DType dtype) override;
  std::unique_ptr<Request> do_all_gather_async_buffer(void* out, const void* in, int64_t count,
                                                      runtime::DType dtype) override;

  void* comm_;  // MPI_Comm (OpenMPI: a pointer)
  int rank_ = 0, size_ = 1;
};

}  // namespace parallel
