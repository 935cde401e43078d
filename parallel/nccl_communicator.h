// Communicator over NCCL for DEVICE buffers. Owns the ncclComm_t, the stream it runs on and
// a device scratch float; every call returns once its transfer is complete (the MPI one's
// semantics). Note [NCCL ordering] in the .cpp says how sends are issued. No CUDA headers here.
#pragma once

#include <vector>

#include "parallel/communicator.h"

struct ncclComm;     // ncclComm_t is ncclComm*
struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace parallel {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`'s group (an MPI communicator over host buffers): rank 0
  // creates the NCCL unique id and broadcasts it through `bootstrap`, then every rank joins
  // with its rank and size. Each rank must have selected its CUDA device beforehand, and
  // keeps using that device for every call.
  explicit NcclCommunicator(Communicator& bootstrap);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  using Communicator::all_gather;
  using Communicator::all_reduce_max;
  using Communicator::all_reduce_sum;
  using Communicator::recv;
  using Communicator::reduce_scatter;
  using Communicator::send_async;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool takes_device_buffers() const override { return true; }
  void all_reduce_sum(void* data, int64_t count, runtime::DType dtype) override;
  void all_reduce_sum(double* data, int64_t count) override;
  void all_reduce_max(float* data, int64_t count) override;
  void all_gather(void* out, const void* in, int64_t count, runtime::DType dtype) override;
  void reduce_scatter(void* out, const void* in, int64_t count, runtime::DType dtype) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void barrier() override;
  // NCCL has no tags: messages between two ranks match in the order they are issued, and
  // `tag` is not used. A request must be waited for (or destroyed) before this communicator.
  std::unique_ptr<Request> send_async(const void* data, int64_t bytes, int peer, int tag) override;
  void recv(void* data, int64_t bytes, int peer, int tag) override;

 private:
  class SendRequest;
  struct PendingSend {
    const void* data;
    int64_t bytes;
    int peer;
  };

  // Waits for all device work queued before the call (Note [NCCL buffers are ready]).
  void wait_for_inputs();
  // Issues the held-back sends as one NCCL group on stream_ (does not wait).
  void issue_pending_sends();
  // Blocks until everything queued on stream_ has completed.
  void synchronize();
  void release() noexcept;

  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  float* scratch_ = nullptr;  // one device float, the payload of barrier()
  std::vector<PendingSend> pending_sends_;
  int rank_ = 0, size_ = 1;
};

}  // namespace parallel
