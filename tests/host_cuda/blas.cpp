// Host definitions of the cuBLAS calls the CUDA backend makes (handle, stream, workspace,
// cublasGemmStridedBatchedEx, status strings), with cuBLAS' documented semantics and checks.
// Only COMPUTE_32F GEMMs on f32 / bf16 run; anything else returns CUBLAS_STATUS_NOT_SUPPORTED.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

#include "tests/host_cuda/gemm_core.h"

// The opaque handle: the stream and workspace a caller set (every call runs synchronously).
struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace host_cuda {
namespace {

constexpr uintptr_t kWorkspaceAlignmentBytes = 256;  // cublasSetWorkspace's documented minimum

bool valid_operation(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// For real element types CUBLAS_OP_C is CUBLAS_OP_T.
bool transposes(cublasOperation_t op) {
  return op != CUBLAS_OP_N;
}

struct StridedBatchedGemm {
  GemmShape shape;
  Operand a, b;
  int64_t stride_a = 0, stride_b = 0;
  float alpha = 1.0f, beta = 0.0f;
  void* c = nullptr;
  Element c_type = Element::f32;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch_count = 0;
};

// The (A/B, C) type pairs cublasGemmEx documents for CUBLAS_COMPUTE_32F that the host runs.
bool supported_types(cudaDataType a_type, cudaDataType b_type, cudaDataType c_type) {
  if (a_type != b_type) return false;
  if (a_type == CUDA_R_32F) return c_type == CUDA_R_32F;
  return a_type == CUDA_R_16BF && (c_type == CUDA_R_16BF || c_type == CUDA_R_32F);
}

// C = alpha op(A) op(B) + beta C for each batch; C is not read when beta is 0.
void run(const StridedBatchedGemm& gemm) {
  const int64_t m = gemm.shape.m;
  for (int64_t batch = 0; batch < gemm.batch_count; ++batch) {
    Operand a = gemm.a;
    Operand b = gemm.b;
    a.data = advance(a.data, a.type, batch * gemm.stride_a);
    b.data = advance(b.data, b.type, batch * gemm.stride_b);
    void* c = advance(gemm.c, gemm.c_type, batch * gemm.stride_c);
    const std::vector<float> product = multiply(gemm.shape, a, b);
    for (int64_t j = 0; j < gemm.shape.n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        float value = gemm.alpha * product[static_cast<size_t>(i + j * m)];
        if (gemm.beta != 0.0f) value += gemm.beta * load(c, gemm.c_type, i + j * gemm.ldc);
        store(c, gemm.c_type, i + j * gemm.ldc, value);
      }
    }
  }
}

}  // namespace
}  // namespace host_cuda

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = streamId;
  handle->workspace = nullptr;  // documented: setting a stream restores the default workspace
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                  size_t workspaceSizeInBytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (reinterpret_cast<uintptr_t>(workspace) % host_cuda::kWorkspaceAlignmentBytes != 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = workspaceSizeInBytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA,
    const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta, void* C,
    cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  using host_cuda::transposes;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!host_cuda::valid_operation(transa) || !host_cuda::valid_operation(transb) || m < 0 ||
      n < 0 || k < 0 || batchCount < 0 || alpha == nullptr || beta == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, transposes(transa) ? k : m) ||
      ldb < std::max(1, transposes(transb) ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (computeType != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT ||
      !host_cuda::supported_types(Atype, Btype, Ctype))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS;
  host_cuda::StridedBatchedGemm gemm;
  gemm.shape = {m, n, k};
  gemm.a = {A, *host_cuda::element_of(Atype), lda, transposes(transa)};
  gemm.b = {B, *host_cuda::element_of(Btype), ldb, transposes(transb)};
  gemm.stride_a = strideA;
  gemm.stride_b = strideB;
  gemm.alpha = *static_cast<const float*>(alpha);  // CUBLAS_POINTER_MODE_HOST, f32 scalars
  gemm.beta = *static_cast<const float*>(beta);
  gemm.c = C;
  gemm.c_type = *host_cuda::element_of(Ctype);
  gemm.ldc = ldc;
  gemm.stride_c = strideC;
  gemm.batch_count = batchCount;
  host_cuda::run(gemm);
  return CUBLAS_STATUS_SUCCESS;
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "the functionality requested requires a license";
  }
  return "unknown error";
}

}  // extern "C"
