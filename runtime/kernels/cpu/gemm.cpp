// Host GEMMs on OpenBLAS (row-major) and the linear layer built on them.
// Parameter gradients accumulate (+=), input gradients are assigned (=). Never call
// these from inside an OpenMP parallel region (OpenBLAS runs its own threads).
#include "runtime/kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "runtime/error.h"

namespace runtime::cpu {
namespace {

// Note [OpenMP and OpenBLAS threads]
// The kernels use OpenMP; sgemm uses OpenBLAS's own pthread pool. With libgomp's default
// wait policy an OpenMP worker keeps spinning for a while after each parallel region, on
// the core OpenBLAS's worker needs next: measured on 2 cores, a 1024x384x128 sgemm that
// follows any parallel region (even an empty one) runs at one-thread speed (1070 us
// instead of 570 us). Run the process with OMP_WAIT_POLICY=passive (libgomp reads it when
// it is loaded, before main) so that both pools share the cores.

blasint blas_dim(int64_t value, const char* name) {
  TRAINER_ASSERT(value >= 0 && value <= INT_MAX,
                 "sgemm " << name << " = " << value << " does not fit OpenBLAS's int");
  return static_cast<blasint>(value);
}

// Column block for the bias reduction: each block is summed by one thread, row by row.
constexpr int64_t kBiasColumnBlock = 64;

}  // namespace

void sgemm(bool transpose_a, bool transpose_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // C = beta * C; OpenBLAS rejects the zero leading dimensions this may bring.
    for (int64_t i = 0; i < M; ++i) {
      float* row = C + i * ldc;
      if (beta == 0.f) {
        std::fill(row, row + N, 0.f);
      } else {
        for (int64_t j = 0; j < N; ++j) row[j] *= beta;
      }
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, blas_dim(M, "M"), blas_dim(N, "N"),
              blas_dim(K, "K"), alpha, A, blas_dim(lda, "lda"), B, blas_dim(ldb, "ldb"), beta, C,
              blas_dim(ldc, "ldc"));
}

void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t rows, int64_t in_features, int64_t out_features) {
  float beta = 0.f;
  if (bias != nullptr) {  // out starts as the bias in every row; the product adds onto it
    const size_t bias_bytes = static_cast<size_t>(out_features) * sizeof(float);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * out_features, bias, bias_bytes);
    beta = 1.f;
  }
  // out(rows, out) = inp(rows, in) W(out, in)^T
  sgemm(false, true, rows, out_features, in_features, 1.f, inp, in_features, weight, in_features,
        beta, out, out_features);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t rows, int64_t in_features, int64_t out_features) {
  // dinp(rows, in) = dout(rows, out) W(out, in)
  if (dinp != nullptr) {
    sgemm(false, false, rows, in_features, out_features, 1.f, dout, out_features, weight,
          in_features, 0.f, dinp, in_features);
  }
  // dweight(out, in) += dout^T inp
  sgemm(true, false, out_features, in_features, rows, 1.f, dout, out_features, inp, in_features,
        1.f, dweight, in_features);
  if (dbias != nullptr) bias_gradient(dbias, dout, rows, out_features);
}

void bias_gradient(float* dbias, const float* dout, int64_t rows, int64_t cols) {
  // Each column block summed over rows in order, in double, then added once.
  const int64_t blocks = (cols + kBiasColumnBlock - 1) / kBiasColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kBiasColumnBlock;
    const int64_t width = std::min(kBiasColumnBlock, cols - c0);
    double sums[kBiasColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = dout + r * cols + c0;
      for (int64_t c = 0; c < width; ++c) sums[c] += row[c];
    }
    for (int64_t c = 0; c < width; ++c) dbias[c0 + c] += static_cast<float>(sums[c]);
  }
}

}  // namespace runtime::cpu
