// Communicator over an MPI communicator (host buffers). Owns the MPI_Comm.
#pragma once

#include "parallel/communicator.h"

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
  void all_reduce_sum(float* data, int64_t count) override;
  void all_reduce_sum(double* data, int64_t count) override;
  void all_reduce_max(float* data, int64_t count) override;
  void all_gather(float* out, const float* in, int64_t count) override;
  void reduce_scatter(float* out, const float* in, int64_t count) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Request> send_async(const void* data, int64_t bytes, int peer, int tag) override;
  void recv(void* data, int64_t bytes, int peer, int tag) override;

 private:
  void* comm_;  // MPI_Comm (OpenMPI: a pointer)
  int rank_ = 0, size_ = 1;
};

}  // namespace parallel
