// Communicator over NCCL for DEVICE buffers. Owns its ncclComm_t and stream, and for the
// pipeline group one two-rank communicator and stream per direction to each ring neighbour
// (Note [NCCL point to point]). Collectives are queued in the compute stream's order and return
// at once (Note [NCCL collectives are stream-ordered]; without a compute stream, once
// complete); non-blocking ones let compute run on until their request is waited for (Note
// [NCCL non-blocking collectives]); sends return at once and complete on their own stream. No
// CUDA headers here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "parallel/core/communicator.h"

struct ncclComm;     // ncclComm_t is ncclComm*
struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace parallel {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`'s group (an MPI communicator over host buffers): rank 0
  // creates the NCCL unique id and broadcasts it through `bootstrap`, then every rank joins
  // with its rank and size. Each rank must have selected its CUDA device beforehand, and
  // keeps using that device for every call. `compute_stream`: where the buffers handed in are
  // produced (Note [NCCL buffers are ready]); null: wait for the whole device. With
  // `ring_point_to_point` (the pipeline group) it also connects each rank to rank +- 1 mod
  // size for send_async/recv.
  explicit NcclCommunicator(Communicator& bootstrap, CUstream_st* compute_stream = nullptr,
                            bool ring_point_to_point = false);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool takes_device_buffers() const override { return true; }

 private:
  // send_async and recv: to and from ring neighbours only (ring_point_to_point). NCCL has no
  // tags: messages from one rank to another are received in the order they were sent, and
  // `tag` is not used.
  TRAINER_BUFFER_HOOK_OVERRIDES;
  // Queued on stream_ after the compute stream's work so far; wait() orders the compute stream
  // after them (Note [NCCL non-blocking collectives]).
  std::unique_ptr<Request> do_reduce_scatter_async_buffer(void* out, const void* in, int64_t count,
                                                          runtime::DType dtype) override;
  std::unique_ptr<Request> do_all_gather_async_buffer(void* out, const void* in, int64_t count,
                                                      runtime::DType dtype) override;

  // A two-rank communicator that carries messages one way, with its own stream.
  struct Channel {
    ncclComm* comm = nullptr;
    CUstream_st* stream = nullptr;
  };

  void connect_ring_neighbours(Communicator& bootstrap);
  std::vector<Channel*> channels_in_pair_order();
  // Makes `stream` wait for the work queued so far where the buffers are produced.
  void order_after_inputs(CUstream_st* stream);
  // One collective on stream_: payload counted, then `launch` (an NCCL call returning its
  // ncclResult_t) unless the call is empty, ordered between the compute stream's work before
  // and after it (Note [NCCL collectives are stream-ordered]).
  void run_collective(int64_t payload_bytes, bool empty, const std::function<int()>& launch);
  // As run_collective, but the compute stream does not wait for it until the request's wait().
  std::unique_ptr<Request> start_collective(int64_t payload_bytes, bool empty,
                                            const std::function<int()>& launch);
  // Waits for the inputs on the host (collectives run on stream_ right after).
  void wait_for_inputs();
  // Blocks until everything queued on stream_ has completed.
  void synchronize();
  void release() noexcept;

  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  CUstream_st* compute_stream_ = nullptr;
  float* scratch_ = nullptr;     // one device float, the payload of barrier()
  std::map<int, Channel> to_;    // peer -> channel this rank sends on
  std::map<int, Channel> from_;  // peer -> channel this rank receives on
  int rank_ = 0, size_ = 1;
};

}  // namespace parallel
