// Helpers shared by the CPU kernel tests: seeded random data, tolerance and bitwise
// comparisons, OpenMP thread-count switching and the thread-count determinism check, a central
// finite-difference check of a directional derivative, and element-wise central differences in
// double. Header-only; every test file includes it.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kernel_test {

inline std::vector<float> random_vector(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<int32_t> random_ints(int64_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = dist(gen);
  return v;
}

inline std::vector<float> filled(int64_t n, float value) {
  return std::vector<float>(static_cast<size_t>(n), value);
}

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `first` followed by each of `rest`: every output of a run in one vector, to compare at once.
template <class... Rest>
std::vector<float> concat(std::vector<float> first, const Rest&... rest) {
  (first.insert(first.end(), rest.begin(), rest.end()), ...);
  return first;
}

// |actual - expected| <= atol + rtol * |expected| everywhere; reports the worst element.
inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t worst = 0, failures = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double bound = atol + rtol * std::fabs(expected[i]);
    const double error = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double excess =
        std::isnan(error) ? std::numeric_limits<double>::infinity() : error - bound;
    if (excess > 0) ++failures;
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << actual.size()
                          << " elements out of tolerance; worst at " << worst << ": got "
                          << actual[worst] << ", want " << expected[worst];
}

// Runs f with `threads` OpenMP threads, then restores the previous setting.
template <class F>
void with_threads(int threads, F f) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(previous);
}

// Expects run() (every output of a kernel call, as one vector) to be bit-identical with 1 and
// with 3 OpenMP threads.
template <class Run>
void expect_thread_count_independent(const Run& run) {
  std::vector<float> one, three;
  with_threads(1, [&] { one = run(); });
  with_threads(3, [&] { three = run(); });
  EXPECT_TRUE(bitwise_equal(one, three));
}

// Central difference of loss(x) along `direction` against the analytic slope <grad, step>.
// The steps actually taken in float (x +- h d, rounded) are used for the analytic side.
template <class Loss>
void expect_directional_derivative(const Loss& loss, const std::vector<float>& x,
                                   const std::vector<float>& direction,
                                   const std::vector<float>& grad, double h, double rtol,
                                   const std::string& what) {
  std::vector<float> plus = x, minus = x;
  double analytic = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    plus[i] = static_cast<float>(x[i] + h * direction[i]);
    minus[i] = static_cast<float>(x[i] - h * direction[i]);
    analytic += static_cast<double>(grad[i]) * (static_cast<double>(plus[i]) - minus[i]) / (2 * h);
  }
  const double numeric = (loss(plus) - loss(minus)) / (2 * h);
  EXPECT_GT(std::fabs(analytic), 1e-3) << what << ": slope too small to test anything";
  EXPECT_NEAR(numeric, analytic, rtol * std::max(1.0, std::fabs(analytic))) << what;
}

// The gradient of loss (a function of a double vector) at x, element by element, by central
// differences in double with step h.
template <class Loss>
std::vector<double> central_differences(const Loss& loss, const std::vector<double>& x,
                                        double h = 1e-5) {
  std::vector<double> probe = x, gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    probe[i] = x[i] + h;
    const double up = loss(probe);
    probe[i] = x[i] - h;
    const double down = loss(probe);
    probe[i] = x[i];
    gradient[i] = (up - down) / (2 * h);
  }
  return gradient;
}

inline double weighted_sum_double(const std::vector<double>& values,
                                  const std::vector<float>& weights) {
  double s = 0.0;
  for (size_t i = 0; i < values.size(); ++i) s += values[i] * weights[i];
  return s;
}

inline double weighted_sum(const std::vector<float>& values, const std::vector<float>& weights) {
  double s = 0.0;
  for (size_t i = 0; i < values.size(); ++i) s += static_cast<double>(values[i]) * weights[i];
  return s;
}

}  // namespace kernel_test
