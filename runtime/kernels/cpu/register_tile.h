// Private to the CPU kernels: the register tile of the attention products (attention.cpp's
// unfused heads and flash_attention.cpp's tiles). One product C(i, n) = alpha * sum_k A(i, k)
// B(k, n), B read by rows and vectorized along n, A read as scalars through (row, k) strides so
// that transposed operands need no copy; each element is summed by one thread over k in
// increasing order, so a result never depends on the thread count. Not part of the kernel
// interface.
#pragma once

#include <cstdint>
#include <cstring>

namespace runtime::cpu::detail {

#if defined(__AVX512F__)
constexpr int kVectorFloats = 16;
#elif defined(__AVX__)
constexpr int kVectorFloats = 8;
#else
constexpr int kVectorFloats = 4;
#endif
typedef float VecF __attribute__((vector_size(kVectorFloats * sizeof(float))));

inline VecF load_vec(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store_vec(float* p, VecF v) {
  std::memcpy(p, &v, sizeof(v));
}

// Operands of one product: A(i, k) = a[i * a_row + k * a_k], B(k, n) = b[k * ldb + n],
// C(i, n) = c[i * ldc + n]; C = alpha A B, or C += alpha A B when accumulate.
struct TileProduct {
  const float* a;
  int64_t a_row;
  int64_t a_k;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  float alpha;
  bool accumulate = false;
};

// C[i0, i0 + Rows) x [n0, n0 + Vectors * kVectorFloats) =
//     alpha * sum_{k0 <= k < k1} A(i, k) B(k, n), accumulated in registers.
template <int Rows, int Vectors>
inline void register_tile(const TileProduct& op, int64_t i0, int64_t n0, int64_t k0, int64_t k1) {
  VecF acc[Rows][Vectors] = {};
  const float* a = op.a + i0 * op.a_row;
  for (int64_t k = k0; k < k1; ++k) {
    const float* b_row = op.b + k * op.ldb + n0;
    VecF b_vec[Vectors];
#pragma GCC unroll 8
    for (int v = 0; v < Vectors; ++v) b_vec[v] = load_vec(b_row + v * kVectorFloats);
    const float* a_k = a + k * op.a_k;
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const float a_value = a_k[r * op.a_row];
#pragma GCC unroll 8
      for (int v = 0; v < Vectors; ++v) acc[r][v] += a_value * b_vec[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    float* c_row = op.c + (i0 + r) * op.ldc + n0;
#pragma GCC unroll 8
    for (int v = 0; v < Vectors; ++v) {
      VecF out = op.alpha * acc[r][v];
      if (op.accumulate) out = load_vec(c_row + v * kVectorFloats) + out;
      store_vec(c_row + v * kVectorFloats, out);
    }
  }
}

}  // namespace runtime::cpu::detail
