// Private helpers of the CPU kernels: an exp that the compiler can vectorize, and
// reductions in a fixed order (interleaved lanes combined left to right), so a row's
// result is the same whatever thread computes it. Not part of the kernel interface.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace runtime::cpu::detail {

// Elementwise loops over fewer elements than this run on one thread: waking the OpenMP
// team costs more than it saves (results never depend on the thread count either way).
constexpr int64_t kMinParallelElements = int64_t{1} << 14;

// e^x in float, within about 2 ulp of the exact value: Cody-Waite reduction
// x = n ln2 + r, |r| <= ln2 / 2, and Cephes' degree-6 polynomial for e^r. Branch free, so
// loops over it vectorize (libm's expf does not). Returns 0 below -87.33 (where e^x leaves
// the normal range), e^88.3 (about 2.4e38) above 88.3, and NaN for NaN.
inline float exp_poly(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi exact in 10 bits
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.f;   // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kMin = -87.3365447505531f;  // ln(2^-126)
  constexpr float kMax = 88.3f;               // keeps n <= 127 (ln(2^127.5) = 88.376)
  const bool is_nan = x != x;
  const float clamped = is_nan ? 0.f : std::min(std::max(x, kMin), kMax);
  const float n = (clamped * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float result = x < kMin ? 0.f : p * two_n;
  return is_nan ? x : result;
}

// tanh(x) = 1 - 2 / (e^{2x} + 1): absolute error a few 1e-8, exact limits at +-infinity.
inline float tanh_poly(float x) {
  return 1.f - 2.f / (exp_poly(2.f * x) + 1.f);
}

constexpr int kSumLanes = 8;

// Sum of f(i) for i in [0, n) in double: kSumLanes interleaved partial sums, combined in order.
template <class F>
double ordered_sum(int64_t n, F f) {
  double lanes[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) lanes[l] += f(i + l);
  for (int l = 0; i < n; ++i, ++l) lanes[l] += f(i);
  double total = 0.0;
  for (int l = 0; l < kSumLanes; ++l) total += lanes[l];
  return total;
}

// max of x[0..n), n >= 1, in interleaved lanes (max is exact, so only NaN handling could
// depend on the order, and the order is fixed).
inline float ordered_max(const float* x, int64_t n) {
  float lanes[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l) lanes[l] = x[0];
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) lanes[l] = std::max(lanes[l], x[i + l]);
  for (int l = 0; i < n; ++i, ++l) lanes[l] = std::max(lanes[l], x[i]);
  float result = lanes[0];
  for (int l = 1; l < kSumLanes; ++l) result = std::max(result, lanes[l]);
  return result;
}

}  // namespace runtime::cpu::detail
