// NCCL collectives and point to point over device buffers, on the communicator's own stream,
// each followed by a stream synchronize. TRAINER_NCCL_CHECK is the NCCL member of the
// library check-macro family. The only parallel_core source that sees CUDA headers.
#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <utility>

#include "parallel/process_groups.h"
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
// reads its input as it is when the call is made. Kernels that produced the buffer may
// still be queued on any compute stream, so every operation first waits for all device
// work queued so far (cudaDeviceSynchronize). The call blocks the host until its transfer
// is complete anyway, so this costs only the overlap of the transfer with kernels queued
// before it. No NCCL kernel of ours is in flight at that point (every call returns
// synchronized and held-back sends are not issued yet), so the wait cannot stall on a peer.
//
// Note [NCCL ordering]
// An NCCL send or receive blocks the GPU until the peer posts its counterpart, and the
// operations of one communicator run one after another. Two stages that each send and
// then receive (the 1F1B steady state) would therefore deadlock if each send ran alone.
// send_async only records the send; the held-back sends are issued by the next operation
// on this communicator: recv() issues them in one NCCL group with its own receive (as
// Megatron's batched isend/irecv), and every other operation and Request::wait() issues
// them first, as a group of their own. Messages between two ranks match in issue order.
// A message to oneself must be received by the very next recv of that rank.

class NcclCommunicator::SendRequest final : public Request {
 public:
  explicit SendRequest(NcclCommunicator* owner) : owner_(owner) {}
  ~SendRequest() override {
    try {
      wait();
    } catch (...) {  // a destructor cannot throw; the error surfaced or will at the next call
    }
  }
  void wait() override {
    if (owner_ == nullptr) return;
    NcclCommunicator* owner = std::exchange(owner_, nullptr);
    if (!owner->pending_sends_.empty()) {
      owner->wait_for_inputs();
      owner->issue_pending_sends();
    }
    owner->synchronize();
  }

 private:
  NcclCommunicator* owner_;
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap)
    : rank_(bootstrap.rank()), size_(bootstrap.size()) {
  ncclUniqueId id{};
  if (rank_ == 0) TRAINER_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof id, 0);
  try {
    TRAINER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TRAINER_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    TRAINER_CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
    TRAINER_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  try {
    if (!pending_sends_.empty()) {  // a send is delivered even if nobody waited for it
      wait_for_inputs();
      issue_pending_sends();
    }
    synchronize();
  } catch (...) {  // a destructor cannot throw: release what we own regardless
  }
  release();
}

void NcclCommunicator::release() noexcept {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  comm_ = nullptr;
  scratch_ = nullptr;
  stream_ = nullptr;
}

void NcclCommunicator::wait_for_inputs() {
  TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
}

void NcclCommunicator::issue_pending_sends() {
  if (pending_sends_.empty()) return;
  // Taken out first: the group is issued once even if a call below throws.
  const std::vector<PendingSend> sends = std::exchange(pending_sends_, {});
  TRAINER_NCCL_CHECK(ncclGroupStart());
  for (const PendingSend& send : sends) {
    TRAINER_NCCL_CHECK(
        ncclSend(send.data, static_cast<size_t>(send.bytes), ncclChar, send.peer, comm_, stream_));
  }
  TRAINER_NCCL_CHECK(ncclGroupEnd());
}

void NcclCommunicator::synchronize() {
  TRAINER_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::all_reduce_sum(void* data, int64_t count, runtime::DType dtype) {
  add_payload(count * runtime::dtype_size(dtype));
  wait_for_inputs();
  issue_pending_sends();
  if (count > 0) {
    TRAINER_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype),
                                     ncclSum, comm_, stream_));
  }
  synchronize();
}

void NcclCommunicator::all_reduce_sum(double* data, int64_t count) {
  add_payload(count * 8);
  wait_for_inputs();
  issue_pending_sends();
  if (count > 0) {
    TRAINER_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat64, ncclSum,
                                     comm_, stream_));
  }
  synchronize();
}

void NcclCommunicator::all_reduce_max(float* data, int64_t count) {
  add_payload(count * 4);
  wait_for_inputs();
  issue_pending_sends();
  if (count > 0) {
    TRAINER_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32, ncclMax,
                                     comm_, stream_));
  }
  synchronize();
}

void NcclCommunicator::all_gather(void* out, const void* in, int64_t count, runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  add_payload(bytes);
  wait_for_inputs();
  issue_pending_sends();
  if (count > 0) {
    TRAINER_NCCL_CHECK(ncclAllGather(in, out, static_cast<size_t>(bytes), ncclChar, comm_, stream_));
  }
  synchronize();
}

void NcclCommunicator::reduce_scatter(void* out, const void* in, int64_t count,
                                      runtime::DType dtype) {
  add_payload(count * size_ * runtime::dtype_size(dtype));
  wait_for_inputs();
  issue_pending_sends();
  if (count > 0) {
    TRAINER_NCCL_CHECK(ncclReduceScatter(in, out, static_cast<size_t>(count), nccl_type(dtype),
                                         ncclSum, comm_, stream_));
  }
  synchronize();
}

void NcclCommunicator::broadcast(void* data, int64_t bytes, int root) {
  wait_for_inputs();
  issue_pending_sends();
  if (bytes > 0) {
    TRAINER_NCCL_CHECK(
        ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclChar, root, comm_, stream_));
  }
  synchronize();
}

void NcclCommunicator::barrier() {
  wait_for_inputs();
  issue_pending_sends();
  TRAINER_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
  synchronize();
}

std::unique_ptr<Request> NcclCommunicator::send_async(const void* data, int64_t bytes, int peer,
                                                      int /*tag: NCCL matches in order*/) {
  TRAINER_ASSERT(peer >= 0 && peer < size_, "send to rank " << peer << " of " << size_);
  add_payload(bytes);
  pending_sends_.push_back({data, bytes, peer});
  return std::make_unique<SendRequest>(this);
}

void NcclCommunicator::recv(void* data, int64_t bytes, int peer, int /*tag*/) {
  TRAINER_ASSERT(peer >= 0 && peer < size_, "receive from rank " << peer << " of " << size_);
  wait_for_inputs();
  const std::vector<PendingSend> sends = std::exchange(pending_sends_, {});
  TRAINER_NCCL_CHECK(ncclGroupStart());
  for (const PendingSend& send : sends) {
    TRAINER_NCCL_CHECK(
        ncclSend(send.data, static_cast<size_t>(send.bytes), ncclChar, send.peer, comm_, stream_));
  }
  TRAINER_NCCL_CHECK(ncclRecv(data, static_cast<size_t>(bytes), ncclChar, peer, comm_, stream_));
  TRAINER_NCCL_CHECK(ncclGroupEnd());
  synchronize();
}

void use_nccl_for_device_tensors(ProcessGroups& groups) {
  add_device_communicators(groups, [](Communicator& host) -> std::unique_ptr<Communicator> {
    return std::make_unique<NcclCommunicator>(host);
  });
}

}  // namespace parallel
