// Tests of layernorm forward/backward against a double reference, the `+=` rule of every
// backward output, finite differences for inp/weight/bias, and bit-identical results
// across thread counts.
#include "runtime/kernels/cpu/layernorm.h"

#include "kernel_test_util.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

struct Reference {
  std::vector<double> out, mean, rstd, dinp, dweight, dbias;
};

// Forward and backward in double; backward results exclude any prior contents.
Reference reference(const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dout, int64_t rows,
                    int64_t C, double eps) {
  Reference ref;
  ref.out.resize(x.size());
  ref.dinp.resize(x.size());
  ref.dweight.assign(C, 0.0);
  ref.dbias.assign(C, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[r * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[r * C + c] - m) * (x[r * C + c] - m);
    const double s = 1.0 / std::sqrt(v / C + eps);
    ref.mean.push_back(m);
    ref.rstd.push_back(s);
    double mean_g = 0, mean_gx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[r * C + c] - m) * s, g = double{dout[r * C + c]} * w[c];
      ref.out[r * C + c] = xhat * w[c] + b[c];
      mean_g += g / C;
      mean_gx += g * xhat / C;
      ref.dweight[c] += dout[r * C + c] * xhat;
      ref.dbias[c] += dout[r * C + c];
    }
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[r * C + c] - m) * s, g = double{dout[r * C + c]} * w[c];
      ref.dinp[r * C + c] = (g - mean_g - xhat * mean_gx) * s;
    }
  }
  return ref;
}

std::vector<double> plus(const std::vector<double>& a, const std::vector<float>& b) {
  std::vector<double> r = a;
  for (size_t i = 0; i < r.size(); ++i) r[i] += b[i];
  return r;
}

TEST(LayerNorm, ForwardMatchesReferenceAndAssigns) {
  const int64_t rows = 19, C = 77;  // C not a multiple of the reduction lanes
  auto x = random_vector(rows * C, 1, -2.f, 2.f);
  for (float& v : x) v += 3.f;  // an offset mean: the variance must not cancel
  const auto w = random_vector(C, 2), b = random_vector(C, 3);
  auto out = filled(rows * C, kNaN), mean = filled(rows, kNaN), rstd = filled(rows, kNaN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                    1e-5f);
  const Reference ref = reference(x, w, b, x, rows, C, 1e-5);
  expect_close(out, ref.out, 1e-5, 1e-5, "out");
  expect_close(mean, ref.mean, 1e-6, 1e-6, "mean");
  expect_close(rstd, ref.rstd, 1e-6, 1e-6, "rstd");
}

TEST(LayerNorm, BackwardMatchesReferenceAndAccumulatesEveryOutput) {
  const int64_t rows = 23, C = 130;
  const auto x = random_vector(rows * C, 4), w = random_vector(C, 5), b = random_vector(C, 6);
  const auto dout = random_vector(rows * C, 7);
  std::vector<float> out(x.size()), mean(rows), rstd(rows);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                    1e-5f);
  const auto dinp0 = random_vector(rows * C, 8), dw0 = random_vector(C, 9),
             db0 = random_vector(C, 10);
  auto dinp = dinp0, dw = dw0, db = db0;
  layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                     mean.data(), rstd.data(), rows, C);
  const Reference ref = reference(x, w, b, dout, rows, C, 1e-5);
  expect_close(dinp, plus(ref.dinp, dinp0), 1e-5, 1e-5, "dinp (+=)");
  expect_close(dw, plus(ref.dweight, dw0), 1e-5, 1e-5, "dweight (+=)");
  expect_close(db, plus(ref.dbias, db0), 1e-5, 1e-5, "dbias (+=)");
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  const int64_t rows = 6, C = 33;
  const auto x = random_vector(rows * C, 11), w = random_vector(C, 12, 0.5f, 1.5f);
  const auto b = random_vector(C, 13), weights = random_vector(rows * C, 14);
  auto loss = [&](const std::vector<float>& xx, const std::vector<float>& ww,
                  const std::vector<float>& bb) {
    std::vector<float> out(xx.size()), mean(rows), rstd(rows);
    layernorm_forward(out.data(), mean.data(), rstd.data(), xx.data(), ww.data(), bb.data(), rows,
                      C, 1e-5f);
    return weighted_sum(out, weights);
  };
  std::vector<float> out(x.size()), mean(rows), rstd(rows);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                    1e-5f);
  std::vector<float> dx(x.size(), 0.f), dw(C, 0.f), db(C, 0.f);
  layernorm_backward(dx.data(), dw.data(), db.data(), weights.data(), x.data(), w.data(),
                     mean.data(), rstd.data(), rows, C);
  expect_directional_derivative([&](const std::vector<float>& v) { return loss(v, w, b); }, x,
                                random_vector(x.size(), 15), dx, 1e-2, 2e-3, "d/dinp");
  expect_directional_derivative([&](const std::vector<float>& v) { return loss(x, v, b); }, w,
                                random_vector(C, 16), dw, 1e-2, 1e-3, "d/dweight");
  expect_directional_derivative([&](const std::vector<float>& v) { return loss(x, w, v); }, b,
                                random_vector(C, 17), db, 1e-2, 1e-3, "d/dbias");
}

TEST(LayerNorm, BitIdenticalAcrossThreadCountsAndRuns) {
  const int64_t rows = 700, C = 200;
  const auto x = random_vector(rows * C, 18), w = random_vector(C, 19), b = random_vector(C, 20);
  const auto dout = random_vector(rows * C, 21);
  auto run = [&] {
    std::vector<float> out(x.size()), mean(rows), rstd(rows), dx(x.size(), 1.f), dw(C, 1.f),
        db(C, 1.f);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C,
                      1e-5f);
    layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), rows, C);
    return concat(out, mean, rstd, dx, dw, db);
  };
  expect_thread_count_independent(run);
  EXPECT_TRUE(bitwise_equal(run(), run()));
}

}  // namespace
