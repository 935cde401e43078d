// Host NCCL: the nccl* functions the backend calls, on host CUDA's memory, over MPI. A
// communicator of one rank copies; a larger one is an MPI communicator of its ranks, and each
// operation is a non-blocking MPI one that its stream finishes (Note [Host CUDA streams]).
// Note [Host NCCL].
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/kernels/cpu/convert.h"
#include "tests/host_cuda/stream_work.h"

// Note [Host NCCL]
// ncclCommInitRank must find the MPI ranks of a communicator's members, which only the
// members know: each writes its MPI rank to a file named by the unique id and its NCCL rank
// (the members share a machine: mpirun on one host), reads the others', and the members
// create the communicator with MPI_Comm_create_group. Inside ncclGroupStart / ncclGroupEnd
// the creations wait for the group's end and run in unique-id order, so members that start
// several communicators in different orders agree. Reductions sum or take the maximum as MPI
// does (bf16 in f32, rounded once per combination); NCCL's own order is not reproduced.
struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;  // null for a communicator of one rank
  int rank = 0;
  int size = 1;
  std::string last_error;
};

namespace host_nccl {
namespace {

namespace fs = std::filesystem;

constexpr int kTagBytes = 16;
constexpr auto kRendezvousLimit = std::chrono::seconds(120);

struct PendingInit {
  ncclComm* comm;
  ncclUniqueId id;
};

struct Group {
  int depth = 0;
  std::vector<PendingInit> inits;
};

Group& group() {
  static Group g;
  return g;
}

std::string tag_of(const ncclUniqueId& id) {
  static const char* kHex = "0123456789abcdef";
  std::string tag;
  for (int i = 0; i < kTagBytes; ++i) {
    const auto byte = static_cast<unsigned char>(id.internal[i]);
    tag += kHex[byte >> 4];
    tag += kHex[byte & 15];
  }
  return tag;
}

fs::path rendezvous_dir(const ncclUniqueId& id) {
  return fs::temp_directory_path() / ("host_nccl_" + tag_of(id));
}

void publish(const PendingInit& init) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const fs::path dir = rendezvous_dir(init.id);
  fs::create_directories(dir);
  const fs::path tmp = dir / (std::to_string(init.comm->rank) + ".tmp");
  std::ofstream(tmp) << world_rank << "\n";
  fs::rename(tmp, dir / std::to_string(init.comm->rank));
}

// Waits for every member's file, then creates the MPI communicator of the members in rank order.
ncclResult_t complete(const PendingInit& init) {
  ncclComm& comm = *init.comm;
  const fs::path dir = rendezvous_dir(init.id);
  std::vector<int> world_ranks(static_cast<size_t>(comm.size), -1);
  const auto deadline = std::chrono::steady_clock::now() + kRendezvousLimit;
  for (int r = 0; r < comm.size; ++r) {
    while (!fs::exists(dir / std::to_string(r))) {
      if (std::chrono::steady_clock::now() > deadline) {
        comm.last_error =
            "host NCCL: rank " + std::to_string(r) + " of " + dir.string() + " never joined";
        return ncclSystemError;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::ifstream(dir / std::to_string(r)) >> world_ranks[static_cast<size_t>(r)];
  }
  MPI_Group world_group, members;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, comm.size, world_ranks.data(), &members);
  uint32_t tag = 0;
  std::memcpy(&tag, init.id.internal, sizeof(tag));
  MPI_Comm_create_group(MPI_COMM_WORLD, members, static_cast<int>(tag & 0x7fff), &comm.mpi);
  MPI_Group_free(&members);
  MPI_Group_free(&world_group);
  MPI_Barrier(comm.mpi);  // every member has read every file
  if (comm.rank == 0) fs::remove_all(dir);
  return ncclSuccess;
}

ncclResult_t complete_group_inits() {
  std::vector<PendingInit> inits = std::move(group().inits);
  group().inits.clear();
  std::sort(inits.begin(), inits.end(), [](const PendingInit& a, const PendingInit& b) {
    return std::memcmp(a.id.internal, b.id.internal, kTagBytes) < 0;
  });
  for (const PendingInit& init : inits) {
    const ncclResult_t result = complete(init);
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

void bf16_combine(void* in, void* inout, int* count, MPI_Datatype*, bool max) {
  auto* a = static_cast<uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *count; ++i) {
    const float x = runtime::cpu::bf16_to_float(a[i]), y = runtime::cpu::bf16_to_float(b[i]);
    b[i] = runtime::cpu::float_to_bf16(max ? std::max(x, y) : x + y);
  }
}
void bf16_sum(void* in, void* inout, int* count, MPI_Datatype* type) {
  bf16_combine(in, inout, count, type, false);
}
void bf16_max(void* in, void* inout, int* count, MPI_Datatype* type) {
  bf16_combine(in, inout, count, type, true);
}

struct MpiTypes {
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum = MPI_OP_NULL, bf16_max = MPI_OP_NULL;
};

MpiTypes& mpi_types() {
  static MpiTypes t = [] {
    MpiTypes made;
    MPI_Type_contiguous(2, MPI_BYTE, &made.bf16);
    MPI_Type_commit(&made.bf16);
    MPI_Op_create(&bf16_sum, 1, &made.bf16_sum);
    MPI_Op_create(&bf16_max, 1, &made.bf16_max);
    return made;
  }();
  return t;
}

// The MPI type and operation of (type, op), or false if host NCCL does not reduce them.
bool mpi_reduction(ncclDataType_t type, ncclRedOp_t op, MPI_Datatype* mpi_type, MPI_Op* mpi_op) {
  if (op != ncclSum && op != ncclMax) return false;
  const bool sum = op == ncclSum;
  switch (type) {
    case ncclFloat32:
      *mpi_type = MPI_FLOAT;
      break;
    case ncclFloat64:
      *mpi_type = MPI_DOUBLE;
      break;
    case ncclInt32:
      *mpi_type = MPI_INT32_T;
      break;
    case ncclBfloat16:
      *mpi_type = mpi_types().bf16;
      *mpi_op = sum ? mpi_types().bf16_sum : mpi_types().bf16_max;
      return true;
    default:
      return false;
  }
  *mpi_op = sum ? MPI_SUM : MPI_MAX;
  return true;
}

// Waits for the stream's pending work that writes what this operation reads or writes.
void begin(cudaStream_t stream, const void* read, size_t read_bytes, const void* written,
           size_t written_bytes) {
  if (read != nullptr) host_cuda::settle_overlapping(stream, read, read_bytes);
  if (written != nullptr) host_cuda::settle_overlapping(stream, written, written_bytes);
}

// A copy of `bytes` at `data`, alive until the operation that reads it has finished.
std::shared_ptr<std::vector<char>> snapshot(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  return std::make_shared<std::vector<char>>(p, p + bytes);
}

// Leaves `request` (and the copy of what it reads) to be finished by `stream`; it writes
// `written` (written_bytes long), if anything.
void defer(cudaStream_t stream, MPI_Request request, std::shared_ptr<std::vector<char>> input,
           const void* written = nullptr, size_t written_bytes = 0) {
  host_cuda::defer(
      stream, [request, input]() mutable { MPI_Wait(&request, MPI_STATUS_IGNORE); }, written,
      written_bytes);
}

}  // namespace
}  // namespace host_nccl

using host_nccl::begin;
using host_nccl::snapshot;
using host_nccl::type_bytes;

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::random_device random;
  for (int i = 0; i < host_nccl::kTagBytes; i += 4) {
    const uint32_t word = random();
    std::memcpy(id->internal + i, &word, 4);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto made = std::make_unique<ncclComm>();
  made->rank = rank;
  made->size = nranks;
  if (nranks > 1) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) return ncclInvalidUsage;  // host NCCL of several ranks runs under mpirun
    const host_nccl::PendingInit init{made.get(), id};
    host_nccl::publish(init);
    if (host_nccl::group().depth > 0) {
      host_nccl::group().inits.push_back(init);
    } else {
      const ncclResult_t result = host_nccl::complete(init);
      if (result != ncclSuccess) return result;
    }
  }
  *comm = made.release();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  host_cuda::settle_all();  // NCCL finishes the communicator's work first
  return ncclCommAbort(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument (host NCCL)";
    case ncclInvalidUsage:
      return "invalid usage (host NCCL)";
    case ncclSystemError:
      return "system error (host NCCL)";
    default:
      return "unhandled error (host NCCL)";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  return comm == nullptr ? "" : comm->last_error.c_str();
}

ncclResult_t ncclGroupStart() {
  ++host_nccl::group().depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (host_nccl::group().depth == 0) return ncclInvalidUsage;
  if (--host_nccl::group().depth > 0) return ncclSuccess;
  return host_nccl::complete_group_inits();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * type_bytes(datatype);
  if (comm == nullptr || type_bytes(datatype) == 0) return ncclInvalidArgument;
  begin(stream, sendbuff, bytes, recvbuff, bytes);
  if (comm->size == 1 || count == 0) {
    std::memmove(recvbuff, sendbuff, bytes);
    return ncclSuccess;
  }
  MPI_Datatype type;
  MPI_Op mpi_op;
  if (!host_nccl::mpi_reduction(datatype, op, &type, &mpi_op)) return ncclInvalidArgument;
  auto input = snapshot(sendbuff, bytes);
  MPI_Request request;
  MPI_Iallreduce(input->data(), recvbuff, static_cast<int>(count), type, mpi_op, comm->mpi,
                 &request);
  host_nccl::defer(stream, request, input, recvbuff, bytes);
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  const size_t bytes = recvcount * type_bytes(datatype);
  if (comm == nullptr || type_bytes(datatype) == 0) return ncclInvalidArgument;
  begin(stream, sendbuff, bytes * static_cast<size_t>(comm->size), recvbuff, bytes);
  if (comm->size == 1 || recvcount == 0) {
    std::memmove(recvbuff, sendbuff, bytes);
    return ncclSuccess;
  }
  MPI_Datatype type;
  MPI_Op mpi_op;
  if (!host_nccl::mpi_reduction(datatype, op, &type, &mpi_op)) return ncclInvalidArgument;
  auto input = snapshot(sendbuff, bytes * static_cast<size_t>(comm->size));
  MPI_Request request;
  MPI_Ireduce_scatter_block(input->data(), recvbuff, static_cast<int>(recvcount), type, mpi_op,
                            comm->mpi, &request);
  host_nccl::defer(stream, request, input, recvbuff, bytes);
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = sendcount * type_bytes(datatype);
  if (comm == nullptr || type_bytes(datatype) == 0) return ncclInvalidArgument;
  begin(stream, sendbuff, bytes, recvbuff, bytes * static_cast<size_t>(comm->size));
  if (comm->size == 1 || sendcount == 0) {
    std::memmove(recvbuff, sendbuff, bytes);
    return ncclSuccess;
  }
  auto input = snapshot(sendbuff, bytes);
  MPI_Request request;
  MPI_Iallgather(input->data(), static_cast<int>(bytes), MPI_BYTE, recvbuff,
                 static_cast<int>(bytes), MPI_BYTE, comm->mpi, &request);
  host_nccl::defer(stream, request, input, recvbuff, bytes * static_cast<size_t>(comm->size));
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * type_bytes(datatype);
  if (comm == nullptr || type_bytes(datatype) == 0 || root < 0 || root >= comm->size)
    return ncclInvalidArgument;
  begin(stream, sendbuff, bytes, recvbuff, bytes);
  if (comm->rank == root && sendbuff != recvbuff) std::memmove(recvbuff, sendbuff, bytes);
  if (comm->size == 1 || count == 0) return ncclSuccess;
  MPI_Request request;
  MPI_Ibcast(recvbuff, static_cast<int>(bytes), MPI_BYTE, root, comm->mpi, &request);
  host_nccl::defer(stream, request, nullptr, recvbuff, bytes);
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * type_bytes(datatype);
  if (comm == nullptr || type_bytes(datatype) == 0 || peer < 0 || peer >= comm->size ||
      comm->mpi == MPI_COMM_NULL)
    return ncclInvalidArgument;
  begin(stream, sendbuff, bytes, nullptr, 0);
  auto input = snapshot(sendbuff, bytes);
  MPI_Request request;
  MPI_Isend(input->data(), static_cast<int>(bytes), MPI_BYTE, peer, 0, comm->mpi, &request);
  host_nccl::defer(stream, request, input);
  return ncclSuccess;
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * type_bytes(datatype);
  if (comm == nullptr || type_bytes(datatype) == 0 || peer < 0 || peer >= comm->size ||
      comm->mpi == MPI_COMM_NULL)
    return ncclInvalidArgument;
  begin(stream, nullptr, 0, recvbuff, bytes);
  MPI_Request request;
  MPI_Irecv(recvbuff, static_cast<int>(bytes), MPI_BYTE, peer, 0, comm->mpi, &request);
  host_nccl::defer(stream, request, nullptr, recvbuff, bytes);
  return ncclSuccess;
}

}  // extern "C"
