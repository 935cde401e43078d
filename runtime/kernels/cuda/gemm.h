// cuBLASLt GEMMs, row-major like the CPU twin (runtime/kernels/cpu/gemm.h), with the
// bias, bias+GELU, bias-gradient and GELU-gradient epilogues of linear layers. Gradient rule as
// on the CPU: dweight and dbias accumulate (+=, fp32 buffers), dinp is assigned (=).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "runtime/dtype.h"

namespace runtime::cuda {

// What linear_forward applies after the product. bias_gelu_aux: out = gelu(x W^T + b)
// with GELU in its tanh form (cuBLASLt's), and gelu_aux = x W^T + b (the GELU input,
// kept for the backward pass). bias_gradient (linear_backward's own, not linear_forward's):
// the weight-gradient product also writes the column sums of dout (cuBLASLt's BGRADB).
// gelu_gradient (input_gradient_through_gelu's): the input-gradient product times GELU'(aux),
// and the column sums of that (cuBLASLt's DGELU_BGRAD).
enum class Epilogue { none, bias, bias_gelu_aux, bias_gradient, gelu_gradient };

// sums(cols) += column sums of matrix(rows, cols) row-major (f32 or bf16), deterministic.
void column_sums_accumulate(float* sums, const void* matrix, int64_t rows, int64_t cols,
                            DType dtype, cudaStream_t stream);

// Note [GEMM precision]
// Supported: A, B f32 with C f32, computed with CUBLAS_COMPUTE_32F (TF32 off, so
// results match the CPU's sgemm to rounding); A, B bf16 with C bf16 or f32, fp32
// accumulation. alpha and beta are fp32 host values.
//
// Note [One LtGemm per stream]
// The workspace is shared by every call of one LtGemm: two streams must not use the
// same LtGemm at once. The object is otherwise thread-safe (the algorithm cache is
// guarded by a mutex).
class LtGemm {
 public:
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;  // 32 MiB

  // Creates the handle and the workspace on the current device.
  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // C(M, N) = alpha * op(A) op(B) + beta * C, op(X) = X or X^T; row-major with leading
  // dims in elements. A and B have ab_type, C has c_type.
  void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
            int64_t lda, const void* B, int64_t ldb, float beta, void* C, int64_t ldc,
            DType ab_type, DType c_type, cudaStream_t stream);

  // batch_count independent gemm()s; matrix i starts at A + i * stride_a (elements),
  // likewise B and C. For attention: one batch per (batch, head).
  void strided_batched_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            float alpha, const void* A, int64_t lda, int64_t stride_a,
                            const void* B, int64_t ldb, int64_t stride_b, float beta, void* C,
                            int64_t ldc, int64_t stride_c, int64_t batch_count, DType ab_type,
                            DType c_type, cudaStream_t stream);

  // out(rows, out_features) = epilogue(inp(rows, in_features) W^T + bias), W (out_features,
  // in_features). Every buffer has act_dtype. bias is null exactly when epilogue is none;
  // gelu_aux (rows, out_features) is non-null exactly for bias_gelu_aux, which also needs
  // out_features % 8 == 0 (cuBLASLt's rule for the aux leading dim). Returns true; false
  // (nothing run) only for bias_gelu_aux when cuBLASLt has no algorithm for it.
  bool linear_forward(void* out, const void* inp, const void* weight, const void* bias,
                      int64_t rows, int64_t in_features, int64_t out_features, DType act_dtype,
                      Epilogue epilogue, void* gelu_aux, cudaStream_t stream);

  // dinp = dout W (=, act_dtype, skipped when null); dweight += dout^T inp (fp32);
  // dbias += column sums of dout (fp32, skipped when null; deterministic): from the
  // weight-gradient product's bias_gradient epilogue into scratch (dbias_scratch: out_features
  // floats on device; null: cudaMallocAsync), then added, or by a column-sum kernel where
  // cuBLASLt has no algorithm for that epilogue.
  void linear_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                       const void* weight, int64_t rows, int64_t in_features, int64_t out_features,
                       DType act_dtype, cudaStream_t stream, float* dbias_scratch = nullptr);

  // The input gradient of a linear layer whose input is gelu(pre_activation), through that GELU
  // (tanh form), in one product: dinp(rows, in_features) = (dout W) * gelu'(pre_activation) (=,
  // act_dtype), and pre_bias (in_features, f32) += column sums of dinp, from the gelu_gradient
  // epilogue into pre_bias_scratch (in_features floats on device), then added. Needs
  // in_features % 8 == 0. false (nothing run) when cuBLASLt has no algorithm for it.
  bool input_gradient_through_gelu(void* dinp, float* pre_bias, const void* dout,
                                   const void* weight, const void* pre_activation, int64_t rows,
                                   int64_t in_features, int64_t out_features, DType act_dtype,
                                   cudaStream_t stream, float* pre_bias_scratch);

  // Number of distinct problems whose algorithm has been chosen and cached.
  int64_t cached_algorithm_count() const;

 private:
  struct Problem;  // one (batched) matmul with its epilogue; defined in gemm.cu
  static constexpr int kKeyFields = 20;
  using AlgorithmKey = std::array<int64_t, kKeyFields>;

  // Runs the problem. When cuBLASLt has no algorithm for it: false (nothing run) for the
  // epilogues that have a fallback (every one but none and bias); LibraryError for the others.
  bool matmul(const Problem& problem, cudaStream_t stream);
  // The cached or heuristic algorithm; false only as matmul says.
  bool find_algorithm(const Problem& problem, cublasLtMatmulDesc_t operation,
                      cublasLtMatrixLayout_t layout_a, cublasLtMatrixLayout_t layout_b,
                      cublasLtMatrixLayout_t layout_c, cublasLtMatmulAlgo_t* algorithm);
  // dweight += dout^T inp with the bias_gradient epilogue, dbias += its column sums; false
  // (nothing run) when cuBLASLt has no algorithm for it.
  bool weight_and_bias_gradient(float* dweight, float* dbias, const void* dout, const void* inp,
                                int64_t rows, int64_t in_features, int64_t out_features,
                                DType act_dtype, cudaStream_t stream, float* dbias_scratch);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // kWorkspaceBytes of device memory
  mutable std::mutex mutex_;
  std::map<AlgorithmKey, cublasLtMatmulAlgo_t> algorithms_;
  std::set<AlgorithmKey> unsupported_;  // problems the heuristic had no algorithm for
  uint32_t rejected_epilogues_ = 0;     // bit e: a launch of Epilogue e failed: never try it again
};

}  // namespace runtime::cuda
