// Attention products as cublasGemmStridedBatchedEx calls (one GEMM per kv head, batched), fp32
// compute (CUBLAS_COMPUTE_32F: no TF32 for f32 operands). Row-major products are issued to
// column-major cuBLAS by swapping the operands (Note [Row-major GEMM]). A kv head's r query
// heads are consecutive (T, *) matrices, i.e. one (r T, *) matrix (Note [Grouped-query
// attention]): products by query head stack them along M, dk and dv sum them along K = r T in
// one GEMM (no atomics, cuBLAS' fixed order); r = 1 is one GEMM per head.
#include <climits>

#include "runtime/error.h"
#include "runtime/kernels/cuda/attention_gemm.h"
#include "runtime/kernels/cuda/cuda_check.h"

namespace runtime::cuda {
namespace {

// cuBLAS' recommended workspace on Hopper (smaller chips use less of it).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Note [Row-major GEMM]
// A row-major (rows, cols) matrix with leading dimension ld is, read column-major, its
// transpose (cols, rows) with the same ld. So the row-major product C = op(A) op(B) is the
// column-major product C^T = op(B)^T op(A)^T: cuBLAS gets B first and A second, each with
// the transpose flag it has in the row-major product, and m = N, n = M.

// One operand of a row-major batched product: element (r, c) of batch b of the stored
// matrix is data[b * stride + r * ld + c]; `transposed` uses the matrix's transpose.
struct RowMajor {
  const void* data;
  int64_t ld;
  int64_t stride;
  bool transposed;
};

template <typename Element>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t data_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}

int checked_int(int64_t value, const char* what) {
  TRAINER_ASSERT(value >= 0 && value <= INT_MAX,
                 "attention GEMM " << what << " = " << value << " outside cuBLAS' int range");
  return static_cast<int>(value);
}

// C(M, N) = alpha * op(A)(M, K) op(B)(K, N) for each of `batch` matrices, all row-major (=).
template <typename Element>
void batched_gemm(Element* c, int64_t ldc, int64_t stride_c, RowMajor a, RowMajor b, int64_t M,
                  int64_t N, int64_t K, float alpha, int64_t batch, CublasHandle& cublas,
                  cudaStream_t stream) {
  if (M == 0 || N == 0 || batch == 0) return;
  const float beta = 0.f;
  const cudaDataType_t type = data_type<Element>();
  TRAINER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas.on_stream(stream), b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
      a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, checked_int(N, "N"), checked_int(M, "M"),
      checked_int(K, "K"), &alpha, b.data, type, checked_int(b.ld, "ldb"), b.stride, a.data, type,
      checked_int(a.ld, "lda"), a.stride, &beta, c, type, checked_int(ldc, "ldc"), stride_c,
      checked_int(batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The kv heads BH / r, checked.
int64_t check_dims(int64_t BH, int64_t T, int64_t D, int64_t r) {
  TRAINER_ASSERT(BH >= 0 && T >= 0 && D >= 0 && r >= 1 && BH % r == 0,
                 "attention GEMM BH=" << BH << " T=" << T << " D=" << D << " group_size=" << r);
  return BH / r;
}

template <typename Element>
void scores_forward(Element* scores, const Element* q, const Element* k, int64_t BH, int64_t T,
                    int64_t D, float scale, int64_t r, CublasHandle& cublas, cudaStream_t stream) {
  const int64_t kv_heads = check_dims(BH, T, D, r);
  // scores(r T, T) = scale * q(r T, D) k(T, D)^T
  batched_gemm(scores, T, r * T * T, RowMajor{q, D, r * T * D, false}, RowMajor{k, D, T * D, true},
               r * T, T, D, scale, kv_heads, cublas, stream);
}

template <typename Element>
void scores_backward(Element* dq, Element* dk, const Element* dscores, const Element* q,
                     const Element* k, int64_t BH, int64_t T, int64_t D, float scale, int64_t r,
                     CublasHandle& cublas, cudaStream_t stream) {
  const int64_t kv_heads = check_dims(BH, T, D, r);
  // dq(r T, D) = scale * dscores(r T, T) k(T, D)
  batched_gemm(dq, D, r * T * D, RowMajor{dscores, T, r * T * T, false},
               RowMajor{k, D, T * D, false}, r * T, D, T, scale, kv_heads, cublas, stream);
  // dk(T, D) = scale * dscores(r T, T)^T q(r T, D)
  batched_gemm(dk, D, T * D, RowMajor{dscores, T, r * T * T, true},
               RowMajor{q, D, r * T * D, false}, T, D, r * T, scale, kv_heads, cublas, stream);
}

template <typename Element>
void context_forward(Element* ctx_heads, const Element* probs, const Element* v, int64_t BH,
                     int64_t T, int64_t D, int64_t r, CublasHandle& cublas, cudaStream_t stream) {
  const int64_t kv_heads = check_dims(BH, T, D, r);
  // ctx(r T, D) = probs(r T, T) v(T, D)
  batched_gemm(ctx_heads, D, r * T * D, RowMajor{probs, T, r * T * T, false},
               RowMajor{v, D, T * D, false}, r * T, D, T, 1.f, kv_heads, cublas, stream);
}

template <typename Element>
void context_backward(Element* dprobs, Element* dv, const Element* dctx_heads, const Element* probs,
                      const Element* v, int64_t BH, int64_t T, int64_t D, int64_t r,
                      CublasHandle& cublas, cudaStream_t stream) {
  const int64_t kv_heads = check_dims(BH, T, D, r);
  // dprobs(r T, T) = dctx(r T, D) v(T, D)^T, every entry: those above the diagonal are left as
  // the product gives them (the causal softmax backward reads only j <= i and writes 0 above it).
  batched_gemm(dprobs, T, r * T * T, RowMajor{dctx_heads, D, r * T * D, false},
               RowMajor{v, D, T * D, true}, r * T, T, D, 1.f, kv_heads, cublas, stream);
  // dv(T, D) = probs(r T, T)^T dctx(r T, D)
  batched_gemm(dv, D, T * D, RowMajor{probs, T, r * T * T, true},
               RowMajor{dctx_heads, D, r * T * D, false}, T, D, r * T, 1.f, kv_heads, cublas,
               stream);
}

}  // namespace

CublasHandle::CublasHandle() {
  TRAINER_CUBLAS_CHECK(cublasCreate(&handle_));
  const cudaError_t status = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (status != cudaSuccess) {
    cublasDestroy(handle_);
    TRAINER_CUDA_CHECK(status);
  }
}

CublasHandle::~CublasHandle() {
  cublasDestroy(handle_);  // waits for the handle's work before releasing it
  cudaFree(workspace_);    // synchronizes the device: no GEMM still reads the workspace
}

cublasHandle_t CublasHandle::on_stream(cudaStream_t stream) {
  TRAINER_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // cublasSetStream resets the workspace to cuBLAS' default pool: hand ours back.
  TRAINER_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  return handle_;
}

void attention_scores_forward(float* scores, const float* q, const float* k, int64_t BH, int64_t T,
                              int64_t D, float scale, int64_t group_size, CublasHandle& cublas,
                              cudaStream_t stream) {
  scores_forward(scores, q, k, BH, T, D, scale, group_size, cublas, stream);
}

void attention_scores_backward(float* dq, float* dk, const float* dscores, const float* q,
                               const float* k, int64_t BH, int64_t T, int64_t D, float scale,
                               int64_t group_size, CublasHandle& cublas, cudaStream_t stream) {
  scores_backward(dq, dk, dscores, q, k, BH, T, D, scale, group_size, cublas, stream);
}

void attention_context_forward(float* ctx_heads, const float* probs, const float* v, int64_t BH,
                               int64_t T, int64_t D, int64_t group_size, CublasHandle& cublas,
                               cudaStream_t stream) {
  context_forward(ctx_heads, probs, v, BH, T, D, group_size, cublas, stream);
}

void attention_context_backward(float* dprobs, float* dv, const float* dctx_heads,
                                const float* probs, const float* v, int64_t BH, int64_t T,
                                int64_t D, int64_t group_size, CublasHandle& cublas,
                                cudaStream_t stream) {
  context_backward(dprobs, dv, dctx_heads, probs, v, BH, T, D, group_size, cublas, stream);
}

void attention_scores_forward(__nv_bfloat16* scores, const __nv_bfloat16* q, const __nv_bfloat16* k,
                              int64_t BH, int64_t T, int64_t D, float scale, int64_t group_size,
                              CublasHandle& cublas, cudaStream_t stream) {
  scores_forward(scores, q, k, BH, T, D, scale, group_size, cublas, stream);
}

void attention_scores_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, const __nv_bfloat16* dscores,
                               const __nv_bfloat16* q, const __nv_bfloat16* k, int64_t BH,
                               int64_t T, int64_t D, float scale, int64_t group_size,
                               CublasHandle& cublas, cudaStream_t stream) {
  scores_backward(dq, dk, dscores, q, k, BH, T, D, scale, group_size, cublas, stream);
}

void attention_context_forward(__nv_bfloat16* ctx_heads, const __nv_bfloat16* probs,
                               const __nv_bfloat16* v, int64_t BH, int64_t T, int64_t D,
                               int64_t group_size, CublasHandle& cublas, cudaStream_t stream) {
  context_forward(ctx_heads, probs, v, BH, T, D, group_size, cublas, stream);
}

void attention_context_backward(__nv_bfloat16* dprobs, __nv_bfloat16* dv,
                                const __nv_bfloat16* dctx_heads, const __nv_bfloat16* probs,
                                const __nv_bfloat16* v, int64_t BH, int64_t T, int64_t D,
                                int64_t group_size, CublasHandle& cublas, cudaStream_t stream) {
  context_backward(dprobs, dv, dctx_heads, probs, v, BH, T, D, group_size, cublas, stream);
}

}  // namespace runtime::cuda
