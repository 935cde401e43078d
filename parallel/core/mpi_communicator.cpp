// MPI collectives with checked calls; large counts are sent in int-sized chunks.
#include "parallel/core/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "parallel/core/mpi_check.h"
#include "runtime/kernels/cpu/convert.h"

namespace parallel {
namespace {
MPI_Comm as_comm(void* comm) {
  return reinterpret_cast<MPI_Comm>(comm);
}
constexpr int64_t kMaxChunk = INT_MAX / 8;

template <typename T>
void all_reduce_chunks(T* data, int64_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  for (int64_t begin = 0; begin < count; begin += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - begin));
    TRAINER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + begin, n, type, op, comm));
  }
}

// inout[i] = bf16(f32(in[i]) + f32(inout[i])) over bf16 bit patterns.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i] = runtime::cpu::float_to_bf16(runtime::cpu::bf16_to_float(a[i]) +
                                       runtime::cpu::bf16_to_float(b[i]));
  }
}

// The MPI type and sum operation of an f32 or bf16 reduction.
std::pair<MPI_Datatype, MPI_Op> sum_of(runtime::DType dtype) {
  if (dtype == runtime::DType::f32) return {MPI_FLOAT, MPI_SUM};
  TRAINER_ASSERT(dtype == runtime::DType::bf16,
                 "MPI sum of " << runtime::dtype_name(dtype) << ": f32 or bf16 only");
  static MPI_Op op = [] {
    MPI_Op created = MPI_OP_NULL;
    TRAINER_MPI_CHECK(MPI_Op_create(&bf16_sum, 1, &created));
    return created;
  }();
  return {MPI_UINT16_T, op};
}

int checked_int(int64_t count, const char* what) {
  TRAINER_ASSERT(count <= INT_MAX, what << " of " << count << " elements exceeds MPI's int count");
  return static_cast<int>(count);
}

// A non-blocking MPI operation; `complete` (if any) runs once, in the wait() that ends it.
class MpiRequest final : public Request {
 public:
  explicit MpiRequest(MPI_Request request, std::function<void()> complete = {})
      : request_(request), complete_(std::move(complete)) {}
  ~MpiRequest() override {
    // Unwinding from an error, the peer may never receive: leave the request (the job is
    // about to be aborted) rather than hang in MPI_Wait.
    if (request_ != MPI_REQUEST_NULL && std::uncaught_exceptions() == 0)
      MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    TRAINER_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    if (complete_) std::exchange(complete_, nullptr)();
  }
  bool done() override {
    int completed = 0;
    TRAINER_MPI_CHECK(MPI_Test(&request_, &completed, MPI_STATUS_IGNORE));
    return completed != 0;
  }

 private:
  MPI_Request request_;
  std::function<void()> complete_;
};
}  // namespace

MpiCommunicator::MpiCommunicator(void* comm) : comm_(comm) {
  TRAINER_MPI_CHECK(MPI_Comm_rank(as_comm(comm_), &rank_));
  TRAINER_MPI_CHECK(MPI_Comm_size(as_comm(comm_), &size_));
}

MpiCommunicator::~MpiCommunicator() {
  MPI_Comm comm = as_comm(comm_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_WORLD && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

void MpiCommunicator::do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) {
  add_payload(count * runtime::dtype_size(dtype));
  const auto [type, op] = sum_of(dtype);
  if (dtype == runtime::DType::f32) {
    all_reduce_chunks(static_cast<float*>(data), count, type, op, as_comm(comm_));
  } else {
    all_reduce_chunks(static_cast<uint16_t*>(data), count, type, op, as_comm(comm_));
  }
}

void MpiCommunicator::do_all_reduce_sum_f64_buffer(double* data, int64_t count) {
  add_payload(count * 8);
  all_reduce_chunks(data, count, MPI_DOUBLE, MPI_SUM, as_comm(comm_));
}

void MpiCommunicator::do_all_reduce_max_buffer(float* data, int64_t count) {
  add_payload(count * 4);
  all_reduce_chunks(data, count, MPI_FLOAT, MPI_MAX, as_comm(comm_));
}

void MpiCommunicator::do_all_gather_buffer(void* out, const void* in, int64_t count,
                                           runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  add_payload(bytes);
  const int n = checked_int(bytes, "all_gather");
  const bool in_place = in == static_cast<const char*>(out) + rank_ * bytes;
  TRAINER_MPI_CHECK(
      MPI_Allgather(in_place ? MPI_IN_PLACE : in, n, MPI_BYTE, out, n, MPI_BYTE, as_comm(comm_)));
}

void MpiCommunicator::do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                               runtime::DType dtype) {
  add_payload(count * size_ * runtime::dtype_size(dtype));
  const int n = checked_int(count, "reduce_scatter");
  const auto [type, op] = sum_of(dtype);
  const int64_t chunk_bytes = count * runtime::dtype_size(dtype);
  if (out != static_cast<const char*>(in) + rank_ * chunk_bytes) {
    TRAINER_MPI_CHECK(MPI_Reduce_scatter_block(in, out, n, type, op, as_comm(comm_)));
    return;
  }
  // In place: MPI leaves the result at the start of the buffer; it moves to this rank's chunk.
  void* buffer = const_cast<void*>(in);
  TRAINER_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, buffer, n, type, op, as_comm(comm_)));
  if (rank_ > 0) std::memmove(out, buffer, static_cast<size_t>(chunk_bytes));
}

std::unique_ptr<Request> MpiCommunicator::do_send_async_buffer(const void* data, int64_t bytes,
                                                               int peer, int tag) {
  add_payload(bytes);
  MPI_Request request = MPI_REQUEST_NULL;
  TRAINER_MPI_CHECK(
      MPI_Isend(data, checked_int(bytes, "send"), MPI_BYTE, peer, tag, as_comm(comm_), &request));
  return std::make_unique<MpiRequest>(request);
}

void MpiCommunicator::do_recv_buffer(void* data, int64_t bytes, int peer, int tag) {
  TRAINER_MPI_CHECK(MPI_Recv(data, checked_int(bytes, "recv"), MPI_BYTE, peer, tag, as_comm(comm_),
                             MPI_STATUS_IGNORE));
}

std::unique_ptr<Request> MpiCommunicator::do_reduce_scatter_async_buffer(void* out, const void* in,
                                                                         int64_t count,
                                                                         runtime::DType dtype) {
  add_payload(count * size_ * runtime::dtype_size(dtype));
  const int n = checked_int(count, "reduce_scatter_async");
  const auto [type, op] = sum_of(dtype);
  const int64_t chunk_bytes = count * runtime::dtype_size(dtype);
  MPI_Request request = MPI_REQUEST_NULL;
  if (out != static_cast<const char*>(in) + rank_ * chunk_bytes) {
    TRAINER_MPI_CHECK(MPI_Ireduce_scatter_block(in, out, n, type, op, as_comm(comm_), &request));
    return std::make_unique<MpiRequest>(request);
  }
  // In place: as the blocking call, the result moves from the buffer's start to this rank's
  // chunk, once the reduction is complete.
  void* buffer = const_cast<void*>(in);
  TRAINER_MPI_CHECK(
      MPI_Ireduce_scatter_block(MPI_IN_PLACE, buffer, n, type, op, as_comm(comm_), &request));
  if (rank_ == 0) return std::make_unique<MpiRequest>(request);
  return std::make_unique<MpiRequest>(
      request, [=] { std::memmove(out, buffer, static_cast<size_t>(chunk_bytes)); });
}

std::unique_ptr<Request> MpiCommunicator::do_all_gather_async_buffer(void* out, const void* in,
                                                                     int64_t count,
                                                                     runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  add_payload(bytes);
  const int n = checked_int(bytes, "all_gather_async");
  const bool in_place = in == static_cast<const char*>(out) + rank_ * bytes;
  MPI_Request request = MPI_REQUEST_NULL;
  TRAINER_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, n, MPI_BYTE, out, n, MPI_BYTE,
                                   as_comm(comm_), &request));
  return std::make_unique<MpiRequest>(request);
}

void MpiCommunicator::do_broadcast(void* data, int64_t bytes, int root) {
  char* p = static_cast<char*>(data);
  for (int64_t begin = 0; begin < bytes; begin += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, bytes - begin));
    TRAINER_MPI_CHECK(MPI_Bcast(p + begin, n, MPI_BYTE, root, as_comm(comm_)));
  }
}

void MpiCommunicator::do_barrier() {
  TRAINER_MPI_CHECK(MPI_Barrier(as_comm(comm_)));
}

}  // namespace parallel
