// Tests of RMSNorm forward/backward against a double reference, the `+=` rule of both backward
// outputs, the gradients against central differences of a double forward, and bit-identical
// results across thread counts.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/rmsnorm.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

// out and rstd of the forward in double.
void reference_forward(std::vector<double>& out, std::vector<double>& rstd,
                       const std::vector<double>& x, const std::vector<double>& w, int64_t rows,
                       int64_t C, double eps) {
  out.assign(x.size(), 0.0);
  rstd.assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double square_sum = 0;
    for (int64_t c = 0; c < C; ++c) square_sum += x[r * C + c] * x[r * C + c];
    rstd[r] = 1.0 / std::sqrt(square_sum / C + eps);
    for (int64_t c = 0; c < C; ++c) out[r * C + c] = w[c] * (x[r * C + c] * rstd[r]);
  }
}

std::vector<double> widen(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<double> plus(const std::vector<double>& a, const std::vector<float>& b) {
  std::vector<double> r = a;
  for (size_t i = 0; i < r.size(); ++i) r[i] += b[i];
  return r;
}

TEST(RmsNorm, ForwardMatchesReferenceAndAssigns) {
  const int64_t rows = 19, C = 77;  // C not a multiple of the reduction lanes
  auto x = random_vector(rows * C, 1, -2.f, 2.f);
  for (float& v : x) v += 3.f;  // an offset: RMSNorm does not subtract the mean
  const auto w = random_vector(C, 2);
  auto out = filled(rows * C, kNaN), rstd = filled(rows, kNaN);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, C, 1e-6f);
  std::vector<double> ref_out, ref_rstd;
  reference_forward(ref_out, ref_rstd, widen(x), widen(w), rows, C, 1e-6);
  expect_close(out, ref_out, 1e-6, 1e-6, "out");
  expect_close(rstd, ref_rstd, 1e-7, 1e-6, "rstd");
}

TEST(RmsNorm, EpsilonBoundsRstdOfZeroRows) {
  const int64_t rows = 2, C = 5;
  const std::vector<float> x(rows * C, 0.f), w = random_vector(C, 3);
  auto out = filled(rows * C, kNaN), rstd = filled(rows, kNaN);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, C, 1e-5f);
  expect_close(rstd, {1.0 / std::sqrt(1e-5), 1.0 / std::sqrt(1e-5)}, 0, 1e-6, "rstd");
  expect_close(out, std::vector<double>(rows * C, 0.0), 0, 0, "out");
}

// The analytic gradients in double: dinp = s (g - xhat mean(g xhat)), dweight = sum dout xhat.
TEST(RmsNorm, BackwardMatchesReferenceAndAccumulatesEveryOutput) {
  const int64_t rows = 23, C = 130;
  const auto x = random_vector(rows * C, 4), w = random_vector(C, 5),
             dout = random_vector(rows * C, 6);
  std::vector<float> out(x.size()), rstd(rows);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, C, 1e-5f);
  const auto dinp0 = random_vector(rows * C, 7), dw0 = random_vector(C, 8);
  auto dinp = dinp0, dw = dw0;
  rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), rows, C);
  std::vector<double> ref_out, ref_rstd, ref_dinp(x.size()), ref_dw(C, 0.0);
  reference_forward(ref_out, ref_rstd, widen(x), widen(w), rows, C, 1e-5);
  for (int64_t r = 0; r < rows; ++r) {
    double mean_g_xhat = 0;
    for (int64_t c = 0; c < C; ++c)
      mean_g_xhat += double{dout[r * C + c]} * w[c] * (x[r * C + c] * ref_rstd[r]) / C;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = x[r * C + c] * ref_rstd[r];
      ref_dinp[r * C + c] = ref_rstd[r] * (double{dout[r * C + c]} * w[c] - xhat * mean_g_xhat);
      ref_dw[c] += dout[r * C + c] * xhat;
    }
  }
  expect_close(dinp, plus(ref_dinp, dinp0), 1e-5, 1e-5, "dinp (+=)");
  expect_close(dw, plus(ref_dw, dw0), 1e-5, 1e-5, "dweight (+=)");
}

// Every element of dinp and dweight against the central difference of a double forward, the
// loss being sum(out * weights).
TEST(RmsNorm, GradientsMatchCentralDifferencesInDouble) {
  const int64_t rows = 5, C = 37;
  const double eps = 1e-5;
  const auto x = random_vector(rows * C, 11), w = random_vector(C, 12, 0.5f, 1.5f);
  const auto weights = random_vector(rows * C, 13);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
    std::vector<double> out, rstd;
    reference_forward(out, rstd, xx, ww, rows, C, eps);
    return weighted_sum_double(out, weights);
  };
  std::vector<float> out(x.size()), rstd(rows);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, C, static_cast<float>(eps));
  std::vector<float> dx(x.size(), 0.f), dw(C, 0.f);
  rmsnorm_backward(dx.data(), dw.data(), weights.data(), x.data(), w.data(), rstd.data(), rows, C);
  const std::vector<double> xd = widen(x), wd = widen(w);
  expect_close(dx, central_differences([&](const auto& v) { return loss(v, wd); }, xd), 1e-5, 1e-4,
               "dinp");
  expect_close(dw, central_differences([&](const auto& v) { return loss(xd, v); }, wd), 1e-5, 1e-4,
               "dweight");
}

TEST(RmsNorm, BitIdenticalAcrossThreadCountsAndRuns) {
  const int64_t rows = 700, C = 200;
  const auto x = random_vector(rows * C, 18), w = random_vector(C, 19);
  const auto dout = random_vector(rows * C, 21);
  auto run = [&] {
    std::vector<float> out(x.size()), rstd(rows), dx(x.size(), 1.f), dw(C, 1.f);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, C, 1e-5f);
    rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), rows, C);
    return concat(out, rstd, dx, dw);
  };
  expect_thread_count_independent(run);
  EXPECT_TRUE(bitwise_equal(run(), run()));
}

}  // namespace
