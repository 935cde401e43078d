// Small vector kernels around the layers and the optimizer. Elementwise ops split n
// across threads; sum_squares uses a fixed chunking (independent of the thread count)
// with each chunk summed in double and the chunk sums combined in order.
#include "runtime/kernels/cpu/elementwise.h"

#include <vector>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

constexpr int64_t kSumChunk = 1 << 16;  // elements per partial sum of sum_squares

}  // namespace

void add(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale_inplace(float* x, float s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void init_param(float* out, const ParamInit& init) {
  // Each element depends on its index alone, so rows fill in parallel (a 1.3B model: seconds).
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < init.rows; ++r)
    for (int64_t c = 0; c < init.cols; ++c) out[r * init.cols + c] = param_init_value(init, r, c);
}

double sum_squares(const float* x, int64_t n) {
  const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const float* begin = x + chunk * kSumChunk;
    const int64_t count = chunk + 1 < chunks ? kSumChunk : n - chunk * kSumChunk;
    partial[static_cast<size_t>(chunk)] = detail::ordered_sum(count, [begin](int64_t i) {
      const double v = begin[i];
      return v * v;
    });
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace runtime::cpu
