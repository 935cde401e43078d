// TRAINER_CUDA_CHECK / TRAINER_CUBLAS_CHECK: the CUDA members of the library
// check-macro family (runtime/error.h): statement, file:line, rank and the
// library's own error string.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "runtime/error.h"

namespace runtime::cuda {
inline bool cuda_ok(cudaError_t status) {
  return status == cudaSuccess;
}
inline std::string cuda_error_string(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}
inline bool cublas_ok(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS;
}
inline std::string cublas_error_string(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
}
}  // namespace runtime::cuda

#define TRAINER_CUDA_CHECK(statement)                                \
  TRAINER_LIBRARY_CHECK("CUDA", statement, ::runtime::cuda::cuda_ok, \
                        ::runtime::cuda::cuda_error_string)
#define TRAINER_CUBLAS_CHECK(statement)                                  \
  TRAINER_LIBRARY_CHECK("cuBLAS", statement, ::runtime::cuda::cublas_ok, \
                        ::runtime::cuda::cublas_error_string)
