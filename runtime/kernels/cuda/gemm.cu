// LtGemm: row-major GEMMs on cuBLASLt (column-major) by the operand swap
// (Note [Row-major through cuBLASLt]), a per-problem cache of the heuristic's choice,
// the bias gradient: the BGRADB epilogue of the weight-gradient product, or a deterministic
// column-sum kernel where cuBLASLt has no algorithm for that epilogue; and the GELU epilogues
// of the MLP (Note [MLP epilogues] in runtime/op_args.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <utility>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/elementwise.h"
#include "runtime/kernels/cuda/gemm.h"

namespace runtime::cuda {

// Note [Row-major through cuBLASLt]
// A row-major (R, C) matrix with leading dim ld is, read column-major, its transpose:
// a (C, R) matrix with the same ld. So row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T: cuBLASLt's first operand is our B, its second our A, keeping
// each transpose flag, and its m, n are our N, M. cuBLASLt's bias is indexed by the
// rows of its D, i.e. by our columns (out_features), as a linear layer wants. Its BGRADB
// epilogue sums its B (our A) over k into a vector of its D's columns (our rows): for the
// weight gradient dweight(out, in) = dout^T(out, rows) inp(rows, in), A = dout transposed
// and k = rows, so that vector is dout's column sums, the bias gradient. Its DGELU_BGRAD
// epilogue (ours gelu_gradient) sums its D over its columns into a vector of its D's rows (our
// columns): for dinp(rows, in), the column sums of dinp. The GELU aux (GELU_AUX_BIAS writes it,
// DGELU_BGRAD reads it) has D's layout, leading dim ldc.
struct LtGemm::Problem {
  bool trans_a = false;
  bool trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f;
  const void* A = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* B = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float beta = 0.0f;
  void* C = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch_count = 1;
  DType ab_type = DType::f32;
  DType c_type = DType::f32;
  Epilogue epilogue = Epilogue::none;
  // N elements of c_type; the gradient epilogues write f32: bias_gradient M, gelu_gradient N.
  const void* bias = nullptr;
  const void* aux = nullptr;  // (M, N) row-major with leading dim ldc, c_type
};

namespace {

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      break;
  }
  TRAINER_ASSERT(false, "cuBLASLt GEMM does not take dtype " << dtype_name(dtype));
  return CUDA_R_32F;
}

cublasLtEpilogue_t lt_epilogue(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::bias_gelu_aux:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::bias_gradient:
      return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::gelu_gradient:
      return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

const char* epilogue_name(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none:
      return "none";
    case Epilogue::bias:
      return "bias";
    case Epilogue::bias_gelu_aux:
      return "bias_gelu_aux";
    case Epilogue::bias_gradient:
      return "bias_gradient";
    case Epilogue::gelu_gradient:
      return "gelu_gradient";
  }
  return "?";
}

// Whether a caller runs something else when cuBLASLt has no algorithm for the epilogue.
bool has_fallback(Epilogue epilogue) {
  return epilogue != Epilogue::none && epilogue != Epilogue::bias;
}

uint32_t epilogue_bit(Epilogue epilogue) {
  return uint32_t{1} << static_cast<uint32_t>(epilogue);
}

// Largest power of two (at most 256, cuBLASLt's default assumption) dividing the
// address and, for batches, the byte stride between matrices; 0 for a null pointer.
int64_t alignment_bytes(const void* ptr, int64_t stride_bytes) {
  if (ptr == nullptr) return 0;
  int64_t alignment = 256;
  const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptr));
  while (alignment > 1 && (address % alignment != 0 || stride_bytes % alignment != 0))
    alignment /= 2;
  return alignment;
}

// RAII owners of the per-call cuBLASLt descriptors.
class OperationDesc {
 public:
  OperationDesc() {
    TRAINER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  }
  ~OperationDesc() { cublasLtMatmulDescDestroy(desc_); }
  OperationDesc(const OperationDesc&) = delete;
  OperationDesc& operator=(const OperationDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    TRAINER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, attribute, &value, sizeof(value)));
  }
  cublasLtMatmulDesc_t get() const { return desc_; }

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
};

class LayoutDesc {
 public:
  // A column-major (rows, cols) matrix with leading dim ld; batch_count matrices
  // stride elements apart.
  LayoutDesc(DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t batch_count,
             int64_t stride) {
    TRAINER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_, cuda_data_type(dtype),
                                                    static_cast<uint64_t>(rows),
                                                    static_cast<uint64_t>(cols), ld));
    if (batch_count > 1) {
      const auto count = static_cast<int32_t>(batch_count);
      TRAINER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout_, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      TRAINER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  ~LayoutDesc() { cublasLtMatrixLayoutDestroy(layout_); }
  LayoutDesc(const LayoutDesc&) = delete;
  LayoutDesc& operator=(const LayoutDesc&) = delete;
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

class PreferenceDesc {
 public:
  PreferenceDesc() { TRAINER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference_)); }
  ~PreferenceDesc() { cublasLtMatmulPreferenceDestroy(preference_); }
  PreferenceDesc(const PreferenceDesc&) = delete;
  PreferenceDesc& operator=(const PreferenceDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
    TRAINER_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference_, attribute, &value, sizeof(value)));
  }
  cublasLtMatmulPreference_t get() const { return preference_; }

 private:
  cublasLtMatmulPreference_t preference_ = nullptr;
};

using device::to_float;

constexpr int kColumnSumColumns = 32;     // columns per block (threadIdx.x)
constexpr int kColumnSumRowThreads = 16;  // row strides per block (threadIdx.y)

// sums[col] += sum over rows of matrix(rows, cols) row-major. Each thread adds a fixed
// set of rows in order, then thread row 0 adds the partials in order: deterministic.
template <typename T>
__global__ void column_sums_accumulate_kernel(float* sums, const T* matrix, int64_t rows,
                                              int64_t cols) {
  __shared__ float partial[kColumnSumRowThreads][kColumnSumColumns];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumnSumColumns + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int64_t row = threadIdx.y; row < rows; row += kColumnSumRowThreads)
      sum += to_float(matrix[row * cols + col]);
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.0f;
    for (int i = 0; i < kColumnSumRowThreads; ++i) total += partial[i][threadIdx.x];
    sums[col] += total;
  }
}

}  // namespace

void column_sums_accumulate(float* sums, const void* matrix, int64_t rows, int64_t cols,
                            DType dtype, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const dim3 block(kColumnSumColumns, kColumnSumRowThreads);
  const dim3 grid(static_cast<unsigned>((cols + kColumnSumColumns - 1) / kColumnSumColumns));
  if (dtype == DType::f32) {
    column_sums_accumulate_kernel<float>
        <<<grid, block, 0, stream>>>(sums, static_cast<const float*>(matrix), rows, cols);
  } else {
    TRAINER_ASSERT(dtype == DType::bf16, "bias gradient of dtype " << dtype_name(dtype));
    column_sums_accumulate_kernel<__nv_bfloat16>
        <<<grid, block, 0, stream>>>(sums, static_cast<const __nv_bfloat16*>(matrix), rows, cols);
  }
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

LtGemm::LtGemm() {
  TRAINER_CUBLAS_CHECK(cublasLtCreate(&handle_));
  const cudaError_t status = cudaMalloc(&workspace_, static_cast<size_t>(kWorkspaceBytes));
  if (status != cudaSuccess) {
    cublasLtDestroy(handle_);
    TRAINER_CUDA_CHECK(status);
  }
}

LtGemm::~LtGemm() {
  cudaFree(workspace_);  // a destructor must not throw
  cublasLtDestroy(handle_);
}

int64_t LtGemm::cached_algorithm_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(algorithms_.size());
}

void LtGemm::gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const void* A, int64_t lda, const void* B, int64_t ldb, float beta, void* C,
                  int64_t ldc, DType ab_type, DType c_type, cudaStream_t stream) {
  strided_batched_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1,
                       ab_type, c_type, stream);
}

void LtGemm::strided_batched_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                  float alpha, const void* A, int64_t lda, int64_t stride_a,
                                  const void* B, int64_t ldb, int64_t stride_b, float beta, void* C,
                                  int64_t ldc, int64_t stride_c, int64_t batch_count, DType ab_type,
                                  DType c_type, cudaStream_t stream) {
  Problem problem;
  problem.trans_a = trans_a;
  problem.trans_b = trans_b;
  problem.M = M;
  problem.N = N;
  problem.K = K;
  problem.alpha = alpha;
  problem.A = A;
  problem.lda = lda;
  problem.stride_a = stride_a;
  problem.B = B;
  problem.ldb = ldb;
  problem.stride_b = stride_b;
  problem.beta = beta;
  problem.C = C;
  problem.ldc = ldc;
  problem.stride_c = stride_c;
  problem.batch_count = batch_count;
  problem.ab_type = ab_type;
  problem.c_type = c_type;
  matmul(problem, stream);
}

bool LtGemm::linear_forward(void* out, const void* inp, const void* weight, const void* bias,
                            int64_t rows, int64_t in_features, int64_t out_features,
                            DType act_dtype, Epilogue epilogue, void* gelu_aux,
                            cudaStream_t stream) {
  TRAINER_ASSERT(epilogue != Epilogue::bias_gradient,
                 "linear_forward: the bias_gradient epilogue is linear_backward's");
  TRAINER_ASSERT((bias == nullptr) == (epilogue == Epilogue::none),
                 "linear_forward: bias must be given exactly when the epilogue adds it (epilogue "
                     << epilogue_name(epilogue) << ")");
  TRAINER_ASSERT((gelu_aux != nullptr) == (epilogue == Epilogue::bias_gelu_aux),
                 "linear_forward: gelu_aux must be given exactly for bias_gelu_aux (epilogue "
                     << epilogue_name(epilogue) << ")");
  TRAINER_ASSERT(epilogue != Epilogue::bias_gelu_aux || out_features % 8 == 0,
                 "linear_forward: bias_gelu_aux needs out_features % 8 == 0, got " << out_features);
  Problem problem;
  problem.trans_a = false;
  problem.trans_b = true;  // inp (rows, in) times W^T, W (out, in)
  problem.M = rows;
  problem.N = out_features;
  problem.K = in_features;
  problem.A = inp;
  problem.lda = in_features;
  problem.B = weight;
  problem.ldb = in_features;
  problem.beta = 0.0f;
  problem.C = out;
  problem.ldc = out_features;
  problem.ab_type = act_dtype;
  problem.c_type = act_dtype;
  problem.epilogue = epilogue;
  problem.bias = bias;
  problem.aux = gelu_aux;
  return matmul(problem, stream);
}

void LtGemm::linear_backward(void* dinp, float* dweight, float* dbias, const void* dout,
                             const void* inp, const void* weight, int64_t rows, int64_t in_features,
                             int64_t out_features, DType act_dtype, cudaStream_t stream,
                             float* dbias_scratch) {
  TRAINER_ASSERT(dweight != nullptr, "linear_backward: dweight is required");
  if (dinp != nullptr) {
    // dinp(rows, in) = dout(rows, out) W(out, in)
    gemm(false, false, rows, in_features, out_features, 1.0f, dout, out_features, weight,
         in_features, 0.0f, dinp, in_features, act_dtype, act_dtype, stream);
  }
  if (dbias != nullptr && weight_and_bias_gradient(dweight, dbias, dout, inp, rows, in_features,
                                                   out_features, act_dtype, stream, dbias_scratch))
    return;
  // dweight(out, in) += dout^T(out, rows) inp(rows, in)
  gemm(true, false, out_features, in_features, rows, 1.0f, dout, out_features, inp, in_features,
       1.0f, dweight, in_features, act_dtype, DType::f32, stream);
  if (dbias != nullptr) column_sums_accumulate(dbias, dout, rows, out_features, act_dtype, stream);
}

bool LtGemm::weight_and_bias_gradient(float* dweight, float* dbias, const void* dout,
                                      const void* inp, int64_t rows, int64_t in_features,
                                      int64_t out_features, DType act_dtype, cudaStream_t stream,
                                      float* dbias_scratch) {
  if (rows == 0 || out_features == 0 || in_features == 0) return false;
  // BGRADB writes (=) the sums; dbias accumulates, so they land in scratch first.
  const device::StreamScratch owned(
      dbias_scratch == nullptr ? static_cast<size_t>(out_features) * sizeof(float) : 0, stream);
  float* sums = dbias_scratch != nullptr ? dbias_scratch : static_cast<float*>(owned.get());
  Problem problem;
  problem.trans_a = true;  // dweight(out, in) += dout^T(out, rows) inp(rows, in)
  problem.trans_b = false;
  problem.M = out_features;
  problem.N = in_features;
  problem.K = rows;
  problem.A = dout;
  problem.lda = out_features;
  problem.B = inp;
  problem.ldb = in_features;
  problem.beta = 1.0f;
  problem.C = dweight;
  problem.ldc = in_features;
  problem.ab_type = act_dtype;
  problem.c_type = DType::f32;
  problem.epilogue = Epilogue::bias_gradient;
  problem.bias = sums;
  if (!matmul(problem, stream)) return false;
  add(dbias, dbias, sums, out_features, stream);
  return true;
}

bool LtGemm::input_gradient_through_gelu(void* dinp, float* pre_bias, const void* dout,
                                         const void* weight, const void* pre_activation,
                                         int64_t rows, int64_t in_features, int64_t out_features,
                                         DType act_dtype, cudaStream_t stream,
                                         float* pre_bias_scratch) {
  TRAINER_ASSERT(in_features % 8 == 0,
                 "input_gradient_through_gelu needs in_features % 8 == 0, got " << in_features);
  if (rows == 0 || in_features == 0 || out_features == 0) return false;
  Problem problem;
  problem.trans_a = false;  // dinp(rows, in) = dout(rows, out) W(out, in)
  problem.trans_b = false;
  problem.M = rows;
  problem.N = in_features;
  problem.K = out_features;
  problem.A = dout;
  problem.lda = out_features;
  problem.B = weight;
  problem.ldb = in_features;
  problem.beta = 0.0f;
  problem.C = dinp;
  problem.ldc = in_features;
  problem.ab_type = act_dtype;
  problem.c_type = act_dtype;
  problem.epilogue = Epilogue::gelu_gradient;
  problem.bias = pre_bias_scratch;  // written (=): pre_bias accumulates
  problem.aux = pre_activation;
  if (!matmul(problem, stream)) return false;
  add(pre_bias, pre_bias, pre_bias_scratch, in_features, stream);
  return true;
}

bool LtGemm::matmul(const Problem& p, cudaStream_t stream) {
  TRAINER_ASSERT(
      p.M >= 0 && p.N >= 0 && p.K > 0 && p.batch_count >= 0,
      "GEMM shape M=" << p.M << " N=" << p.N << " K=" << p.K << " batch=" << p.batch_count);
  if (p.M == 0 || p.N == 0 || p.batch_count == 0) return true;
  TRAINER_ASSERT(p.ab_type == DType::bf16 || (p.ab_type == DType::f32 && p.c_type == DType::f32),
                 "GEMM dtypes A/B " << dtype_name(p.ab_type) << ", C " << dtype_name(p.c_type)
                                    << " (Note [GEMM precision])");
  TRAINER_ASSERT(p.c_type == DType::f32 || p.c_type == DType::bf16,
                 "GEMM C dtype " << dtype_name(p.c_type));
  // Row-major leading dims: at least the row length of the stored matrix.
  TRAINER_ASSERT(p.lda >= (p.trans_a ? p.M : p.K), "lda " << p.lda << " too small");
  TRAINER_ASSERT(p.ldb >= (p.trans_b ? p.K : p.N), "ldb " << p.ldb << " too small");
  TRAINER_ASSERT(p.ldc >= p.N, "ldc " << p.ldc << " too small");

  // Note [Row-major through cuBLASLt]: cuBLASLt's A is our B, its B our A.
  const cublasOperation_t op_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const LayoutDesc layout_first(p.ab_type, p.trans_b ? p.K : p.N, p.trans_b ? p.N : p.K, p.ldb,
                                p.batch_count, p.stride_b);
  const LayoutDesc layout_second(p.ab_type, p.trans_a ? p.M : p.K, p.trans_a ? p.K : p.M, p.lda,
                                 p.batch_count, p.stride_a);
  const LayoutDesc layout_c(p.c_type, p.N, p.M, p.ldc, p.batch_count, p.stride_c);

  OperationDesc operation;
  operation.set(CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(op_first));
  operation.set(CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(op_second));
  operation.set(CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(p.epilogue));
  if (p.epilogue != Epilogue::none) operation.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  if (p.epilogue == Epilogue::bias_gelu_aux || p.epilogue == Epilogue::gelu_gradient) {
    operation.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
    operation.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.ldc);
  }
  // The gradients' sums are f32 (parameter gradients are), whatever D's type.
  if (p.epilogue == Epilogue::bias_gradient || p.epilogue == Epilogue::gelu_gradient)
    operation.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(CUDA_R_32F));

  cublasLtMatmulAlgo_t algorithm = {};
  if (!find_algorithm(p, operation.get(), layout_first.get(), layout_second.get(), layout_c.get(),
                      &algorithm))
    return false;
  const cublasStatus_t cublas_lt_matmul =
      cublasLtMatmul(handle_, operation.get(), &p.alpha, p.B, layout_first.get(), p.A,
                     layout_second.get(), &p.beta, p.C, layout_c.get(), p.C, layout_c.get(),
                     &algorithm, workspace_, static_cast<size_t>(kWorkspaceBytes), stream);
  if (cublas_lt_matmul != CUBLAS_STATUS_SUCCESS && has_fallback(p.epilogue)) {
    std::lock_guard<std::mutex> lock(mutex_);
    rejected_epilogues_ |= epilogue_bit(p.epilogue);  // refused at launch, nothing ran: the
    return false;                                     // fallback from now on
  }
  TRAINER_CUBLAS_CHECK(cublas_lt_matmul);
  return true;
}

bool LtGemm::find_algorithm(const Problem& p, cublasLtMatmulDesc_t operation,
                            cublasLtMatrixLayout_t layout_first,
                            cublasLtMatrixLayout_t layout_second, cublasLtMatrixLayout_t layout_c,
                            cublasLtMatmulAlgo_t* algorithm) {
  const int64_t ab_size = dtype_size(p.ab_type);
  const int64_t c_size = dtype_size(p.c_type);
  const int64_t batched = p.batch_count > 1 ? 1 : 0;
  const int64_t align_a = alignment_bytes(p.A, batched * p.stride_a * ab_size);
  const int64_t align_b = alignment_bytes(p.B, batched * p.stride_b * ab_size);
  const int64_t align_c = alignment_bytes(p.C, batched * p.stride_c * c_size);
  // The heuristic reads the bias and aux pointers off the descriptor for their alignment.
  const AlgorithmKey key = {p.trans_a,
                            p.trans_b,
                            p.M,
                            p.N,
                            p.K,
                            p.lda,
                            p.ldb,
                            p.ldc,
                            p.batch_count,
                            batched * p.stride_a,
                            batched * p.stride_b,
                            batched * p.stride_c,
                            static_cast<int64_t>(p.ab_type),
                            static_cast<int64_t>(p.c_type),
                            static_cast<int64_t>(p.epilogue),
                            align_a,
                            align_b,
                            align_c,
                            alignment_bytes(p.bias, 0),
                            alignment_bytes(p.aux, 0)};
  std::lock_guard<std::mutex> lock(mutex_);
  if ((rejected_epilogues_ & epilogue_bit(p.epilogue)) != 0) return false;
  auto found = algorithms_.find(key);
  if (found != algorithms_.end()) {
    *algorithm = found->second;
    return true;
  }
  if (unsupported_.count(key) != 0) return false;

  PreferenceDesc preference;
  preference.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
  // cuBLASLt's A is our B (Note [Row-major through cuBLASLt]).
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(align_b));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(align_a));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(align_c));
  preference.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(align_c));

  cublasLtMatmulHeuristicResult_t result = {};
  int result_count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, operation, layout_first, layout_second, layout_c,
                                     layout_c, preference.get(), 1, &result, &result_count);
  if ((status != CUBLAS_STATUS_SUCCESS || result_count == 0) && has_fallback(p.epilogue)) {
    unsupported_.insert(key);  // the caller runs the unfused ops
    return false;
  }
  if (status != CUBLAS_STATUS_SUCCESS || result_count == 0) {
    throw LibraryError(TRAINER_STR(
        "[rank " << error_rank() << "] cuBLASLt has no algorithm for row-major GEMM trans_a="
                 << p.trans_a << " trans_b=" << p.trans_b << " M=" << p.M << " N=" << p.N
                 << " K=" << p.K << " lda=" << p.lda << " ldb=" << p.ldb << " ldc=" << p.ldc
                 << " batch=" << p.batch_count << " A/B " << dtype_name(p.ab_type) << " C "
                 << dtype_name(p.c_type) << " epilogue " << epilogue_name(p.epilogue)
                 << " alignments " << align_a << "/" << align_b << "/" << align_c << " ("
                 << cublas_error_string(status) << ")"));
  }
  algorithms_.emplace(key, result.algo);
  *algorithm = result.algo;
  return true;
}

}  // namespace runtime::cuda
