// The GEMM core shared by the host cuBLAS (blas.cpp) and cuBLASLt (blas_lt.cpp): column-major
// operands of f32 or bf16 read as float, each product element a float sum over k in k order.
// Private to tests/host_cuda; "device" pointers are host memory there.
#pragma once

#include <library_types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/kernels/cpu/convert.h"

namespace host_cuda {

enum class Element { f32, bf16 };

// The element type of a cudaDataType, when it is one the host library computes with.
inline std::optional<Element> element_of(int32_t data_type) {
  if (data_type == CUDA_R_32F) return Element::f32;
  if (data_type == CUDA_R_16BF) return Element::bf16;
  return std::nullopt;
}

inline int64_t element_bytes(Element type) {
  return type == Element::f32 ? 4 : 2;
}

// base advanced by `elements` elements of the type.
inline const void* advance(const void* base, Element type, int64_t elements) {
  return static_cast<const char*>(base) + elements * element_bytes(type);
}
inline void* advance(void* base, Element type, int64_t elements) {
  return static_cast<char*>(base) + elements * element_bytes(type);
}

inline float load(const void* base, Element type, int64_t index) {
  if (type == Element::f32) return static_cast<const float*>(base)[index];
  return runtime::cpu::bf16_to_float(static_cast<const uint16_t*>(base)[index]);
}

// Stores value rounded to the element type (bf16: round to nearest even).
inline void store(void* base, Element type, int64_t index, float value) {
  if (type == Element::f32) {
    static_cast<float*>(base)[index] = value;
  } else {
    static_cast<uint16_t*>(base)[index] = runtime::cpu::float_to_bf16(value);
  }
}

// One column-major operand: element (row, col) of the stored matrix is data[row + col * ld].
// `transposed` makes op(X) the stored matrix's transpose.
struct Operand {
  const void* data = nullptr;
  Element type = Element::f32;
  int64_t ld = 0;
  bool transposed = false;

  // Element (row, col) of op(X).
  float at(int64_t row, int64_t col) const {
    return transposed ? load(data, type, col + row * ld) : load(data, type, row + col * ld);
  }
};

struct GemmShape {
  int64_t m = 0;  // rows of op(A) and of the product
  int64_t n = 0;  // columns of op(B) and of the product
  int64_t k = 0;  // columns of op(A), rows of op(B)
};

// The product op(A)(m, k) op(B)(k, n) as floats, column-major with leading dim m: element
// (i, j) is the float sum over l = 0, 1, ..., k-1 of op(A)(i, l) * op(B)(l, j), in that order.
inline std::vector<float> multiply(const GemmShape& shape, const Operand& a, const Operand& b) {
  const int64_t m = shape.m;
  std::vector<float> a_columns(static_cast<size_t>(m * shape.k));  // op(A), ld m
  for (int64_t l = 0; l < shape.k; ++l)
    for (int64_t i = 0; i < m; ++i) a_columns[static_cast<size_t>(l * m + i)] = a.at(i, l);
  std::vector<float> product(static_cast<size_t>(m * shape.n), 0.0f);
  for (int64_t j = 0; j < shape.n; ++j) {
    float* column = product.data() + j * m;
    for (int64_t l = 0; l < shape.k; ++l) {
      const float b_lj = b.at(l, j);
      const float* a_column = a_columns.data() + l * m;
      for (int64_t i = 0; i < m; ++i) column[i] += a_column[i] * b_lj;
    }
  }
  return product;
}

}  // namespace host_cuda
