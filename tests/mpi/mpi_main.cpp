// GoogleTest main for tests under mpirun: every rank runs every test; only rank
// 0 prints; the ranks agree on the verdict (any failure fails every rank), so
// the job's exit code is the same everywhere and no rank waits on another.
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/error.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  runtime::set_error_rank(rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && failed) std::fprintf(stderr, "some rank failed a test\n");
  MPI_Finalize();
  return failed;
}
