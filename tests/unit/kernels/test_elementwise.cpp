// Tests of the small vector kernels: exact elementwise results (with aliasing), and a
// sum of squares that matches a double reference and is bit-identical for any thread count.
#include "runtime/kernels/cpu/elementwise.h"

#include "kernel_test_util.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

TEST(Elementwise, AddAssignsAndMayAliasEitherInput) {
  const int64_t n = 1001;
  const auto a = random_vector(n, 1), b = random_vector(n, 2);
  auto out = filled(n, kNaN);
  add(out.data(), a.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
  auto alias_a = a, alias_b = b;
  add(alias_a.data(), alias_a.data(), b.data(), n);
  add(alias_b.data(), a.data(), alias_b.data(), n);
  EXPECT_TRUE(bitwise_equal(alias_a, out));
  EXPECT_TRUE(bitwise_equal(alias_b, out));
}

TEST(Elementwise, ScaleInplace) {
  const int64_t n = 517;
  const auto x0 = random_vector(n, 4);
  auto x = x0;
  scale_inplace(x.data(), -0.75f, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], x0[i] * -0.75f);
}

TEST(SumSquares, MatchesDoubleReferenceAcrossChunkBoundaries) {
  EXPECT_EQ(sum_squares(nullptr, 0), 0.0);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{65536}, int64_t{3 * 65536 + 17}}) {
    const auto x = random_vector(n, 5, -3.f, 3.f);
    double want = 0;
    for (float v : x) want += double{v} * v;
    EXPECT_NEAR(sum_squares(x.data(), n), want, 1e-12 * want) << n;
  }
}

TEST(SumSquares, BitIdenticalAcrossThreadCounts) {
  const int64_t n = 5 * 65536 + 123;
  const auto x = random_vector(n, 6, -1e3f, 1e3f);
  double one = 0, two = 0, three = 0;
  with_threads(1, [&] { one = sum_squares(x.data(), n); });
  with_threads(2, [&] { two = sum_squares(x.data(), n); });
  with_threads(3, [&] { three = sum_squares(x.data(), n); });
  EXPECT_EQ(std::memcmp(&one, &two, sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(&one, &three, sizeof(double)), 0);
}

}  // namespace
