// Dense matrix products on the host (OpenBLAS sgemm), row-major throughout.
// Linear layers keep PyTorch's weight layout W (out_features, in_features).
// Gradient rule: parameter gradients accumulate (+=), input gradients are assigned (=).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// C(M, N) = alpha * op(A) op(B) + beta * C, with op(X) = X or X^T; row-major, leading dims given.
void sgemm(bool transpose_a, bool transpose_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc);

// out(rows, out_features) = inp(rows, in_features) W^T + bias; bias may be null.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t rows, int64_t in_features, int64_t out_features);

// dinp = dout W (=, skipped when dinp is null); dweight += dout^T inp;
// dbias += column sums of dout (skipped when null).
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t rows, int64_t in_features, int64_t out_features);

// dbias(cols) += column sums of dout(rows, cols), each summed in double (linear_backward's).
void bias_gradient(float* dbias, const float* dout, int64_t rows, int64_t cols);

}  // namespace runtime::cpu
