// MPI collectives with checked calls; large counts are sent in int-sized chunks.
#include "parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>

#include "parallel/mpi_check.h"

namespace parallel {
namespace {
MPI_Comm as_comm(void* comm) { return reinterpret_cast<MPI_Comm>(comm); }
constexpr int64_t kMaxChunk = INT_MAX / 8;

template <typename T>
void all_reduce_chunks(T* data, int64_t count, MPI_Datatype type, MPI_Comm comm) {
  for (int64_t begin = 0; begin < count; begin += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - begin));
    TRAINER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + begin, n, type, MPI_SUM, comm));
  }
}
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

void MpiCommunicator::all_reduce_sum(float* data, int64_t count) {
  all_reduce_chunks(data, count, MPI_FLOAT, as_comm(comm_));
}

void MpiCommunicator::all_reduce_sum(double* data, int64_t count) {
  all_reduce_chunks(data, count, MPI_DOUBLE, as_comm(comm_));
}

void MpiCommunicator::broadcast(void* data, int64_t bytes, int root) {
  char* p = static_cast<char*>(data);
  for (int64_t begin = 0; begin < bytes; begin += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, bytes - begin));
    TRAINER_MPI_CHECK(MPI_Bcast(p + begin, n, MPI_BYTE, root, as_comm(comm_)));
  }
}

void MpiCommunicator::barrier() { TRAINER_MPI_CHECK(MPI_Barrier(as_comm(comm_))); }

}  // namespace parallel
