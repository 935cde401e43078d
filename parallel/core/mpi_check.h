// TRAINER_MPI_CHECK: the MPI member of the library check-macro family.
#pragma once

#include <mpi.h>

#include <string>

#include "runtime/error.h"

namespace parallel {
inline bool mpi_ok(int status) {
  return status == MPI_SUCCESS;
}
inline std::string mpi_error_string(int status) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  return std::string(text, static_cast<size_t>(length));
}
}  // namespace parallel

#define TRAINER_MPI_CHECK(statement) \
  TRAINER_LIBRARY_CHECK("MPI", statement, ::parallel::mpi_ok, ::parallel::mpi_error_string)
