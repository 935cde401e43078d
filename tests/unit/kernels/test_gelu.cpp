// Tests of both GELU forms against double references (forward and derivative), finite
// differences, in-place use, and that every element is computed the same way whatever
// slice of the array a call covers (alignment and split independence).
#include "runtime/kernels/cpu/gelu.h"

#include "kernel_test_util.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

double gelu_reference(double x, GeluKind kind) {
  if (kind == GeluKind::erf) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

double gelu_grad_reference(double x, GeluKind kind) {
  if (kind == GeluKind::erf)
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
           x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  const double s = std::sqrt(2.0 / M_PI), u = s * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x);
}

std::vector<float> inputs() {
  auto x = random_vector(2001, 1, -8.f, 8.f);
  for (float v : {0.f, -0.f, 1e-6f, -1e-6f, 3.f, -3.f, 20.f, -20.f}) x.push_back(v);
  return x;
}

class Gelu : public ::testing::TestWithParam<GeluKind> {};

TEST_P(Gelu, ForwardMatchesReference) {
  const auto x = inputs();
  auto out = filled(x.size(), kNaN);
  gelu_forward(out.data(), x.data(), x.size(), GetParam());
  std::vector<double> want;
  for (float v : x) want.push_back(gelu_reference(v, GetParam()));
  expect_close(out, want, 2e-6, 2e-6, "gelu");
  auto in_place = x;
  gelu_forward(in_place.data(), in_place.data(), x.size(), GetParam());
  EXPECT_TRUE(bitwise_equal(in_place, out));
}

TEST_P(Gelu, BackwardMatchesReferenceDerivative) {
  const auto x = inputs();
  const auto dout = random_vector(x.size(), 2);
  auto dinp = filled(x.size(), kNaN);
  gelu_backward(dinp.data(), dout.data(), x.data(), x.size(), GetParam());
  std::vector<double> want;
  for (size_t i = 0; i < x.size(); ++i)
    want.push_back(dout[i] * gelu_grad_reference(x[i], GetParam()));
  expect_close(dinp, want, 2e-6, 2e-6, "dgelu");
  auto in_place = dout;
  gelu_backward(in_place.data(), in_place.data(), x.data(), x.size(), GetParam());
  EXPECT_TRUE(bitwise_equal(in_place, dinp));
}

TEST_P(Gelu, BackwardMatchesFiniteDifferences) {
  const auto x = random_vector(500, 3, -4.f, 4.f), weights = random_vector(500, 4);
  auto loss = [&](const std::vector<float>& v) {
    std::vector<float> out(v.size());
    gelu_forward(out.data(), v.data(), v.size(), GetParam());
    return weighted_sum(out, weights);
  };
  std::vector<float> dx(x.size());
  gelu_backward(dx.data(), weights.data(), x.data(), x.size(), GetParam());
  expect_directional_derivative(loss, x, random_vector(500, 5), dx, 1e-2, 1e-3, "d/dx");
}

TEST_P(Gelu, ElementsDoNotDependOnTheSliceOrThreads) {
  constexpr int64_t n = 40001;  // above the size where the kernels go parallel
  const auto x = random_vector(n, 6, -5.f, 5.f);
  const auto dout = random_vector(n, 7);
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<float> out(end - begin), dx(end - begin);
    gelu_forward(out.data(), x.data() + begin, end - begin, GetParam());
    gelu_backward(dx.data(), dout.data() + begin, x.data() + begin, end - begin, GetParam());
    out.insert(out.end(), dx.begin(), dx.end());
    return out;
  };
  std::vector<float> whole, one;
  with_threads(3, [&] { whole = run(0, n); });
  with_threads(1, [&] { one = run(0, n); });
  EXPECT_TRUE(bitwise_equal(whole, one));
  // A slice starting one element in (a different alignment) gives the same values.
  const auto slice = run(1, n - 1);
  const int64_t m = n - 2;
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_EQ(slice[i], whole[i + 1]) << "forward " << i;
    ASSERT_EQ(slice[m + i], whole[n + i + 1]) << "backward " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, Gelu, ::testing::Values(GeluKind::tanh, GeluKind::erf),
                         [](const auto& instance) {
                           return std::string(instance.param == GeluKind::tanh ? "tanh" : "erf");
                         });

}  // namespace
