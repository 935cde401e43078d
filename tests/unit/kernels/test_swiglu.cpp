// Tests of SwiGLU forward against a double reference (saturating gates included), the backward
// against central differences of a double forward, the `=` rule, in-place use of the backward,
// and bit-identical results across thread counts.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/swiglu.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

double silu(double g) {
  return g / (1.0 + std::exp(-g));
}

// out of the forward in double; inp (rows, 2 * ffn) holds [gate | up] per row.
std::vector<double> reference_forward(const std::vector<double>& inp, int64_t rows, int64_t ffn) {
  std::vector<double> out(static_cast<size_t>(rows * ffn));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < ffn; ++j)
      out[r * ffn + j] = silu(inp[r * 2 * ffn + j]) * inp[r * 2 * ffn + ffn + j];
  return out;
}

TEST(SwiGlu, ForwardMatchesReferenceAndAssigns) {
  const int64_t rows = 9, ffn = 61;
  auto inp = random_vector(rows * 2 * ffn, 1, -8.f, 8.f);
  // Saturating and exact gates: silu(-100) ~ 0, silu(100) = 100, silu(0) = 0.
  const float gates[] = {-100.f, -30.f, 0.f, 30.f, 100.f, -0.f};
  for (int k = 0; k < 6; ++k) inp[k] = gates[k];
  auto out = filled(rows * ffn, kNaN);
  swiglu_forward(out.data(), inp.data(), rows, ffn);
  expect_close(out, reference_forward(std::vector<double>(inp.begin(), inp.end()), rows, ffn), 1e-6,
               1e-6, "out");
}

TEST(SwiGlu, BackwardMatchesCentralDifferencesInDoubleAndAssigns) {
  const int64_t rows = 4, ffn = 29;
  const auto inp = random_vector(rows * 2 * ffn, 2, -5.f, 5.f), dout = random_vector(rows * ffn, 3);
  auto dinp = filled(rows * 2 * ffn, kNaN);
  swiglu_backward(dinp.data(), dout.data(), inp.data(), rows, ffn);
  const auto numeric = central_differences(
      [&](const std::vector<double>& v) {
        return weighted_sum_double(reference_forward(v, rows, ffn), dout);
      },
      std::vector<double>(inp.begin(), inp.end()));
  expect_close(dinp, numeric, 1e-5, 1e-5, "dinp (dgate | dup)");
}

TEST(SwiGlu, BackwardInPlaceEqualsOutOfPlace) {
  const int64_t rows = 7, ffn = 45;
  const auto inp = random_vector(rows * 2 * ffn, 4, -6.f, 6.f), dout = random_vector(rows * ffn, 5);
  std::vector<float> separate(inp.size());
  swiglu_backward(separate.data(), dout.data(), inp.data(), rows, ffn);
  std::vector<float> in_place = inp;
  swiglu_backward(in_place.data(), dout.data(), in_place.data(), rows, ffn);
  EXPECT_TRUE(bitwise_equal(in_place, separate));
}

TEST(SwiGlu, BitIdenticalAcrossThreadCountsAndRuns) {
  const int64_t rows = 300, ffn = 257;
  const auto inp = random_vector(rows * 2 * ffn, 6, -6.f, 6.f), dout = random_vector(rows * ffn, 7);
  auto run = [&] {
    std::vector<float> out(rows * ffn), dinp(inp.size());
    swiglu_forward(out.data(), inp.data(), rows, ffn);
    swiglu_backward(dinp.data(), dout.data(), inp.data(), rows, ffn);
    return concat(out, dinp);
  };
  expect_thread_count_independent(run);
  EXPECT_TRUE(bitwise_equal(run(), run()));
}

}  // namespace
