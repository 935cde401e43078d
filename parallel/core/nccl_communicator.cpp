// NCCL collectives on the communicator's own stream, ordered by events between compute-stream
// work, and point to point over per-direction channels; TRAINER_NCCL_CHECK. The only
// parallel_core source that sees CUDA headers.
#include "parallel/core/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "parallel/core/process_groups.h"
#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"

namespace parallel {
namespace {

bool nccl_ok(ncclResult_t status) {
  return status == ncclSuccess;
}
// The NCCL type of a reduction's dtype (f32 or bf16).
ncclDataType_t nccl_type(runtime::DType dtype) {
  TRAINER_ASSERT(dtype == runtime::DType::f32 || dtype == runtime::DType::bf16,
                 "NCCL reduction of " << runtime::dtype_name(dtype) << ": f32 or bf16 only");
  return dtype == runtime::DType::f32 ? ncclFloat32 : ncclBfloat16;
}

std::string nccl_error_string(ncclResult_t status) {
  std::string message = ncclGetErrorString(status);
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && detail[0] != '\0') message += std::string(" (") + detail + ")";
  return message;
}

}  // namespace
}  // namespace parallel

#define TRAINER_NCCL_CHECK(statement) \
  TRAINER_LIBRARY_CHECK("NCCL", statement, ::parallel::nccl_ok, ::parallel::nccl_error_string)

namespace parallel {

// Note [NCCL buffers are ready]
// The Communicator interface has no stream argument: like the MPI communicator, a call
// reads its input as it is when the call is made. The kernels that produced a buffer may
// still be queued on the compute stream (the CUDA backend's one stream), so a collective
// first waits for that stream, and a send or receive makes its own stream wait for it (an
// event, without blocking the host). It must not wait for the whole device: a send in flight
// on a channel stream waits for its peer's receive, and a rank that waited for it before
// posting its own receive could wait forever (two stages sending to each other).
//
// Note [NCCL collectives are stream-ordered]
// With a compute stream, a collective neither waits on the host for its inputs nor for its
// own completion: stream_ waits for the compute stream (an event), the collective is queued,
// and the compute stream waits for stream_ (another event). Everything that reads a
// collective's result (kernels, downloads, the allocator's next user of a freed buffer) runs
// on the compute stream and so after it; and since each collective's stream waits for the
// compute stream, which waited for the previous collective, the collectives of all
// communicators still run one at a time in host order, as when the host waited for each.
// A barrier still waits on the host. Without a compute stream the host waits on both sides.
//
// Note [NCCL non-blocking collectives]
// A non-blocking collective (Note [Non-blocking collectives]) is queued like a blocking one,
// on stream_ after an event of the compute stream (so after the kernels that produced its
// input), but the compute stream does not wait for it: compute goes on while it runs. Its
// request records an event on stream_ after it; wait() makes the compute stream wait for that
// event (no host block), so whatever reads the result, or reuses its memory, is queued after
// it; done() queries the event. Until then collectives of other communicators may run
// concurrently with it; every rank queues them in the same order, which NCCL needs.
//
// Note [NCCL point to point]
// An NCCL send blocks its stream until the peer posts the matching receive, and operations
// of one communicator run in order on its stream. Pipeline stages send and receive in both
// directions at once, so sends and receives on one communicator can deadlock (each side's
// send waits for a receive queued behind the other side's send), and holding sends back to
// group them with the next receive deadlocks the interleaved schedule. So every ordered pair
// of ring neighbours (this rank to rank + 1, to rank - 1, and back) has a two-rank
// communicator and stream of its own that carries messages one way only: a send is queued on
// it and returns (MPI's send_async), a receive blocks until its message arrived. That is the
// MPI path's ordering exactly; messages from one rank to another are received in the order
// they were sent (tests/unit/parallel/test_schedule_order.cpp).

namespace {

// A request completed by an event recorded on a stream after the work; done() polls the event.
class EventRequest : public Request {
 public:
  bool done() override {
    if (done_ == nullptr) return true;
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) {
      static_cast<void>(cudaGetLastError());  // "not yet" is no error for the next launch check
      return false;
    }
    TRAINER_CUDA_CHECK(status);
    return true;
  }

 protected:
  explicit EventRequest(cudaEvent_t done) : done_(done) {}
  cudaEvent_t done_;
};

// The completion of a send on its channel stream.
class ChannelSend final : public EventRequest {
 public:
  explicit ChannelSend(cudaEvent_t done) : EventRequest(done) {}
  ~ChannelSend() override {
    if (done_ == nullptr) return;
    if (std::uncaught_exceptions() == 0) cudaEventSynchronize(done_);  // unwinding: never block
    cudaEventDestroy(done_);
  }
  void wait() override {
    if (done_ == nullptr) return;
    const cudaEvent_t done = std::exchange(done_, nullptr);
    const cudaError_t status = cudaEventSynchronize(done);
    cudaEventDestroy(done);
    TRAINER_CUDA_CHECK(status);
  }
};

// The completion of a non-blocking collective on the communicator's stream; wait() makes
// `consumer` (the compute stream) wait for it.
class StreamCollective final : public EventRequest {
 public:
  StreamCollective(cudaEvent_t done, CUstream_st* consumer)
      : EventRequest(done), consumer_(consumer) {}
  ~StreamCollective() override {
    if (done_ == nullptr) return;
    if (std::uncaught_exceptions() == 0) {  // never waited for: still order later work after it
      static_cast<void>(cudaStreamWaitEvent(consumer_, done_, 0));
    }
    cudaEventDestroy(done_);
  }
  void wait() override {
    if (done_ == nullptr) return;
    const cudaEvent_t done = std::exchange(done_, nullptr);
    const cudaError_t status = cudaStreamWaitEvent(consumer_, done, 0);
    cudaEventDestroy(done);  // released once the wait is done
    TRAINER_CUDA_CHECK(status);
  }

 private:
  CUstream_st* consumer_;
};

constexpr int kIdTag = 0x6e63;  // bootstrap messages carrying channel ids

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, CUstream_st* compute_stream,
                                   bool ring_point_to_point)
    : compute_stream_(compute_stream), rank_(bootstrap.rank()), size_(bootstrap.size()) {
  ncclUniqueId id{};
  if (rank_ == 0) TRAINER_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof id, 0);
  // The channels wait for the compute stream, never the whole device (Note [NCCL buffers are
  // ready]): a device-wide wait would also wait for sends in flight.
  TRAINER_ASSERT(!ring_point_to_point || size_ == 1 || compute_stream != nullptr,
                 "NCCL point to point needs the compute stream");
  // Implicit launch order serializes every communicator's kernels on the GPU in host order,
  // so a receive would wait for this rank's sends in flight: the channels need it off.
  const char* implicit_order = std::getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
  if (ring_point_to_point && size_ > 1 && implicit_order != nullptr &&
      std::string(implicit_order) != "0") {
    throw runtime::LibraryError(TRAINER_STR(
        "NCCL_LAUNCH_ORDER_IMPLICIT=" << implicit_order
                                      << " orders all NCCL kernels of a GPU in host order, which "
                                         "deadlocks the pipeline's channels (Note [NCCL point to "
                                         "point]); unset it or set it to 0"));
  }
  try {
    TRAINER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TRAINER_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    TRAINER_CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
    TRAINER_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    if (ring_point_to_point && size_ > 1) connect_ring_neighbours(bootstrap);
  } catch (...) {
    release();
    throw;
  }
}

void NcclCommunicator::connect_ring_neighbours(Communicator& bootstrap) {
  // Every ordered pair (this rank, neighbour) and (neighbour, this rank): this rank creates
  // the id of the channels it sends on and hands it to the neighbour, which receives on it.
  const int next = (rank_ + 1) % size_, previous = (rank_ + size_ - 1) % size_;
  std::map<int, ncclUniqueId> sending, receiving;
  for (int peer : {next, previous}) {
    if (sending.count(peer) != 0) continue;  // two ranks: next and previous are one peer
    TRAINER_NCCL_CHECK(ncclGetUniqueId(&sending[peer]));
  }
  std::vector<std::unique_ptr<Request>> sends;
  for (auto& [peer, id] : sending)
    sends.push_back(bootstrap.send_async(&id, sizeof id, peer, kIdTag));
  for (const auto& entry : sending) {
    const int peer = entry.first;  // the neighbours this rank sends to also send to it
    bootstrap.recv(&receiving[peer], sizeof(ncclUniqueId), peer, kIdTag);
  }
  for (auto& send : sends) send->wait();
  // All channels of all ranks join in one group, so no rank waits for one another has not
  // started: in a pair the sender is rank 0, the receiver rank 1.
  TRAINER_NCCL_CHECK(ncclGroupStart());
  for (auto& [peer, id] : sending) TRAINER_NCCL_CHECK(ncclCommInitRank(&to_[peer].comm, 2, id, 0));
  for (auto& [peer, id] : receiving)
    TRAINER_NCCL_CHECK(ncclCommInitRank(&from_[peer].comm, 2, id, 1));
  TRAINER_NCCL_CHECK(ncclGroupEnd());
  for (auto* channels : {&to_, &from_}) {
    for (auto& entry : *channels) {
      TRAINER_CUDA_CHECK(cudaStreamCreateWithFlags(&entry.second.stream, cudaStreamNonBlocking));
    }
  }
}

std::vector<NcclCommunicator::Channel*> NcclCommunicator::channels_in_pair_order() {
  // Destroying (or aborting) a communicator waits for its other rank to do the same, so every
  // rank goes through the channels in one global order: by (sender, receiver).
  std::map<std::pair<int, int>, Channel*> ordered;
  for (auto& [peer, channel] : to_) ordered[{rank_, peer}] = &channel;
  for (auto& [peer, channel] : from_) ordered[{peer, rank_}] = &channel;
  std::vector<Channel*> channels;
  for (auto& entry : ordered) channels.push_back(entry.second);
  return channels;
}

NcclCommunicator::~NcclCommunicator() {
  // Unwinding from an error: peers may never post what an operation in flight waits for, so
  // abort instead of waiting (the job is about to end).
  if (std::uncaught_exceptions() > 0) {
    for (Channel* channel : channels_in_pair_order())
      if (channel->comm != nullptr) ncclCommAbort(std::exchange(channel->comm, nullptr));
    if (comm_ != nullptr) ncclCommAbort(std::exchange(comm_, nullptr));
  } else {
    try {
      synchronize();
      for (auto* channels : {&to_, &from_})
        for (auto& entry : *channels)
          if (entry.second.stream != nullptr) cudaStreamSynchronize(entry.second.stream);
    } catch (...) {  // a destructor cannot throw: release what we own regardless
    }
  }
  release();
}

void NcclCommunicator::release() noexcept {
  for (Channel* channel : channels_in_pair_order()) {
    if (channel->comm != nullptr) ncclCommDestroy(channel->comm);
    if (channel->stream != nullptr) cudaStreamDestroy(channel->stream);
  }
  to_.clear();
  from_.clear();
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  comm_ = nullptr;
  scratch_ = nullptr;
  stream_ = nullptr;
}

namespace {

// Makes `waiter` wait for the work queued on `producer` so far (an event, no host block).
void stream_wait(CUstream_st* waiter, CUstream_st* producer) {
  cudaEvent_t produced = nullptr;
  TRAINER_CUDA_CHECK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(produced, producer);
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(waiter, produced, 0) : recorded;
  cudaEventDestroy(produced);  // released once the wait is done
  TRAINER_CUDA_CHECK(waited);
}

}  // namespace

void NcclCommunicator::order_after_inputs(CUstream_st* stream) {
  if (compute_stream_ == nullptr) {
    TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
    return;
  }
  stream_wait(stream, compute_stream_);
}

void NcclCommunicator::wait_for_inputs() {
  if (compute_stream_ == nullptr) {
    TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    TRAINER_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
  }
}

void NcclCommunicator::synchronize() {
  TRAINER_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::run_collective(int64_t payload_bytes, bool empty,
                                      const std::function<int()>& launch) {
  add_payload(payload_bytes);
  if (compute_stream_ == nullptr) {  // no stream to order by: the host waits on both sides
    wait_for_inputs();
    if (!empty) TRAINER_NCCL_CHECK(static_cast<ncclResult_t>(launch()));
    synchronize();
    return;
  }
  if (empty) return;
  // Note [NCCL collectives are stream-ordered]: compute -> stream_ -> compute, by events.
  stream_wait(stream_, compute_stream_);
  TRAINER_NCCL_CHECK(static_cast<ncclResult_t>(launch()));
  stream_wait(compute_stream_, stream_);
}

std::unique_ptr<Request> NcclCommunicator::start_collective(int64_t payload_bytes, bool empty,
                                                            const std::function<int()>& launch) {
  if (compute_stream_ == nullptr || empty) {  // nothing to overlap with: as the blocking call
    run_collective(payload_bytes, empty, launch);
    return std::make_unique<CompletedRequest>();
  }
  add_payload(payload_bytes);
  // Note [NCCL non-blocking collectives]: compute -> stream_ by an event; back in wait().
  stream_wait(stream_, compute_stream_);
  TRAINER_NCCL_CHECK(static_cast<ncclResult_t>(launch()));
  cudaEvent_t done = nullptr;
  TRAINER_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  auto request = std::make_unique<StreamCollective>(done, compute_stream_);  // owns the event
  TRAINER_CUDA_CHECK(cudaEventRecord(done, stream_));
  return request;
}

void NcclCommunicator::do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) {
  run_collective(count * runtime::dtype_size(dtype), count == 0, [&] {
    return ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm_,
                         stream_);
  });
}

void NcclCommunicator::do_all_reduce_sum_f64_buffer(double* data, int64_t count) {
  run_collective(count * 8, count == 0, [&] {
    return ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat64, ncclSum, comm_,
                         stream_);
  });
}

void NcclCommunicator::do_all_reduce_max_buffer(float* data, int64_t count) {
  run_collective(count * 4, count == 0, [&] {
    return ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32, ncclMax, comm_,
                         stream_);
  });
}

// NCCL runs all-gathers and reduce-scatters in place when the caller's buffers are laid out
// so (Communicator's in-place convention is NCCL's).
void NcclCommunicator::do_all_gather_buffer(void* out, const void* in, int64_t count,
                                            runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  run_collective(bytes, count == 0, [&] {
    return ncclAllGather(in, out, static_cast<size_t>(bytes), ncclChar, comm_, stream_);
  });
}

void NcclCommunicator::do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                                runtime::DType dtype) {
  run_collective(count * size_ * runtime::dtype_size(dtype), count == 0, [&] {
    return ncclReduceScatter(in, out, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm_,
                             stream_);
  });
}

std::unique_ptr<Request> NcclCommunicator::do_reduce_scatter_async_buffer(void* out, const void* in,
                                                                          int64_t count,
                                                                          runtime::DType dtype) {
  return start_collective(count * size_ * runtime::dtype_size(dtype), count == 0, [&] {
    return ncclReduceScatter(in, out, static_cast<size_t>(count), nccl_type(dtype), ncclSum, comm_,
                             stream_);
  });
}

std::unique_ptr<Request> NcclCommunicator::do_all_gather_async_buffer(void* out, const void* in,
                                                                      int64_t count,
                                                                      runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  return start_collective(bytes, count == 0, [&] {
    return ncclAllGather(in, out, static_cast<size_t>(bytes), ncclChar, comm_, stream_);
  });
}

void NcclCommunicator::do_broadcast(void* data, int64_t bytes, int root) {
  run_collective(0, bytes == 0, [&] {
    return ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclChar, root, comm_, stream_);
  });
}

void NcclCommunicator::do_barrier() {
  run_collective(0, false, [&] {
    return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
  });
  synchronize();  // a barrier is a host rendezvous
}

std::unique_ptr<Request> NcclCommunicator::do_send_async_buffer(
    const void* data, int64_t bytes, int peer, int /*tag: NCCL matches in order*/) {
  const auto channel = to_.find(peer);
  TRAINER_ASSERT(channel != to_.end(), "NCCL send to rank "
                                           << peer << " of " << size_
                                           << ": only ring neighbours of the pipeline group");
  add_payload(bytes);
  CUstream_st* stream = channel->second.stream;
  order_after_inputs(stream);
  TRAINER_NCCL_CHECK(ncclSend(data, static_cast<size_t>(bytes), ncclChar, /*peer in pair*/ 1,
                              channel->second.comm, stream));
  cudaEvent_t done = nullptr;
  TRAINER_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  auto request = std::make_unique<ChannelSend>(done);  // owns the event from here
  TRAINER_CUDA_CHECK(cudaEventRecord(done, stream));
  return request;
}

void NcclCommunicator::do_recv_buffer(void* data, int64_t bytes, int peer, int /*tag*/) {
  const auto channel = from_.find(peer);
  TRAINER_ASSERT(channel != from_.end(), "NCCL receive from rank "
                                             << peer << " of " << size_
                                             << ": only ring neighbours of the pipeline group");
  CUstream_st* stream = channel->second.stream;
  order_after_inputs(stream);  // the buffer's memory may still be in use by queued kernels
  TRAINER_NCCL_CHECK(ncclRecv(data, static_cast<size_t>(bytes), ncclChar, /*peer in pair*/ 0,
                              channel->second.comm, stream));
  TRAINER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void use_nccl_for_device_tensors(ProcessGroups& groups, void* compute_stream) {
  add_device_communicators(
      groups, [&](Communicator& host, bool point_to_point) -> std::unique_ptr<Communicator> {
        return std::make_unique<NcclCommunicator>(host, static_cast<CUstream_st*>(compute_stream),
                                                  point_to_point);
      });
}

}  // namespace parallel
