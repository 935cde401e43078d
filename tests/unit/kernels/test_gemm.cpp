// Tests of sgemm and the linear layer against naive double-precision references, the
// `=` (dinp) vs `+=` (dweight, dbias) rule, finite differences, and products and gradients
// that do not depend on the thread count.
#include <tuple>

#include "kernel_test_util.h"
#include "runtime/kernels/cpu/gemm.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

// out(rows, out_f) = inp W^T + b in double.
std::vector<double> linear_reference(const std::vector<float>& inp, const std::vector<float>& w,
                                     const float* bias, int64_t rows, int64_t in_f, int64_t out_f) {
  std::vector<double> out(static_cast<size_t>(rows * out_f));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      double s = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < in_f; ++i) s += double{inp[r * in_f + i]} * w[o * in_f + i];
      out[r * out_f + o] = s;
    }
  return out;
}

// sgemm(M, N, K) against the naive product for every transpose, with padded leading dims.
void expect_sgemm_matches_naive(int64_t M, int64_t N, int64_t K) {
  const float alpha = 0.7f, beta = 0.3f;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
      const auto A = random_vector((ta ? K : M) * lda, 1);
      const auto B = random_vector((tb ? N : K) * ldb, 2);
      auto C = random_vector(M * ldc, 3);
      const auto C0 = C;
      sgemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      std::vector<float> got;
      std::vector<double> want;
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double s = 0.0;
          for (int64_t k = 0; k < K; ++k)
            s += double{ta ? A[k * lda + i] : A[i * lda + k]} *
                 (tb ? B[j * ldb + k] : B[k * ldb + j]);
          want.push_back(alpha * s + beta * double{C0[i * ldc + j]});
          got.push_back(C[i * ldc + j]);
        }
        for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(C[i * ldc + j], C0[i * ldc + j]) << "padding";
      }
      expect_close(got, want, 1e-5, 1e-5,
                   "sgemm " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                       std::to_string(K) + " ta=" + std::to_string(ta) +
                       " tb=" + std::to_string(tb));
    }
  }
}

TEST(Sgemm, MatchesNaiveProductForEveryTransposeWithPaddedLeadingDims) {
  expect_sgemm_matches_naive(37, 29, 41);
}

// Note [Host GEMM threads]: with 2 and 3 threads the 2400 rows of C are split into ranges.
TEST(Sgemm, RowRangesOverThreadsMatchNaiveProduct) {
  for (int threads : {2, 3})
    with_threads(threads, [] { expect_sgemm_matches_naive(2400, 67, 90); });
}

// Products split into pieces with 3 threads (2400 x 67 x 90: three of 800 rows), a product
// too small to split, and one whose pieces would fall under OpenBLAS's small-matrix kernel.
TEST(Sgemm, BitIdenticalAcrossThreadCountsForEveryTranspose) {
  for (const auto& [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{2400, 67, 90}, {250, 67, 90}, {1000, 67, 90}}) {
    const auto A = random_vector(M * K, 30), B = random_vector(K * N, 31);
    const auto C0 = random_vector(M * N, 32);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.f, 0.5f}) {
          expect_thread_count_independent([&] {
            auto C = C0;
            sgemm(ta, tb, M, N, K, 1.f, A.data(), ta ? M : K, B.data(), tb ? K : N, beta, C.data(),
                  N);
            return C;
          });
        }
      }
    }
  }
}

TEST(Sgemm, EmptyReductionScalesOrClearsC) {
  auto C = random_vector(6, 4);
  const auto C0 = C;
  sgemm(false, false, 2, 3, 0, 1.f, nullptr, 0, nullptr, 3, 0.5f, C.data(), 3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(C[i], 0.5f * C0[i]);
  auto garbage = filled(6, kNaN);
  sgemm(false, false, 2, 3, 0, 1.f, nullptr, 0, nullptr, 3, 0.f, garbage.data(), 3);
  for (float v : garbage) EXPECT_EQ(v, 0.f);
}

TEST(Linear, ForwardAssignsWithAndWithoutBias) {
  const int64_t rows = 33, in_f = 47, out_f = 65;
  const auto x = random_vector(rows * in_f, 5), w = random_vector(out_f * in_f, 6);
  const auto b = random_vector(out_f, 7);
  auto out = filled(rows * out_f, kNaN);  // garbage must be overwritten, not accumulated into
  linear_forward(out.data(), x.data(), w.data(), b.data(), rows, in_f, out_f);
  expect_close(out, linear_reference(x, w, b.data(), rows, in_f, out_f), 1e-5, 1e-5, "with bias");
  out = filled(rows * out_f, kNaN);
  linear_forward(out.data(), x.data(), w.data(), nullptr, rows, in_f, out_f);
  expect_close(out, linear_reference(x, w, nullptr, rows, in_f, out_f), 1e-5, 1e-5, "no bias");
}

TEST(Linear, BackwardAssignsInputGradAndAccumulatesParameterGrads) {
  const int64_t rows = 31, in_f = 23, out_f = 70;
  const auto x = random_vector(rows * in_f, 8), w = random_vector(out_f * in_f, 9);
  const auto dout = random_vector(rows * out_f, 10);
  const auto dw0 = random_vector(out_f * in_f, 11), db0 = random_vector(out_f, 12);
  auto dx = filled(rows * in_f, kNaN);
  auto dw = dw0, db = db0;
  linear_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), rows, in_f,
                  out_f);
  std::vector<double> want_dx(dx.size(), 0.0), want_dw(dw.size()), want_db(db.size());
  for (int64_t o = 0; o < out_f; ++o) {
    double sb = db0[o];
    for (int64_t r = 0; r < rows; ++r) sb += dout[r * out_f + o];
    want_db[o] = sb;
    for (int64_t i = 0; i < in_f; ++i) {
      double sw = dw0[o * in_f + i];
      for (int64_t r = 0; r < rows; ++r) sw += double{dout[r * out_f + o]} * x[r * in_f + i];
      want_dw[o * in_f + i] = sw;
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in_f; ++i)
      for (int64_t o = 0; o < out_f; ++o)
        want_dx[r * in_f + i] += double{dout[r * out_f + o]} * w[o * in_f + i];
  expect_close(dx, want_dx, 1e-5, 1e-5, "dinp (=)");
  expect_close(dw, want_dw, 1e-5, 1e-5, "dweight (+=)");
  expect_close(db, want_db, 1e-5, 1e-5, "dbias (+=)");

  // Null dinp and dbias are skipped; dweight still accumulates.
  auto dw_only = dw0;
  linear_backward(nullptr, dw_only.data(), nullptr, dout.data(), x.data(), w.data(), rows, in_f,
                  out_f);
  expect_close(dw_only, want_dw, 1e-5, 1e-5, "dweight without dinp/dbias");
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  const int64_t rows = 7, in_f = 13, out_f = 11;
  const auto x = random_vector(rows * in_f, 13), w = random_vector(out_f * in_f, 14);
  const auto b = random_vector(out_f, 15), weights = random_vector(rows * out_f, 16);
  auto loss = [&](const std::vector<float>& xx, const std::vector<float>& ww,
                  const std::vector<float>& bb) {
    std::vector<float> out(static_cast<size_t>(rows * out_f));
    linear_forward(out.data(), xx.data(), ww.data(), bb.data(), rows, in_f, out_f);
    return weighted_sum(out, weights);
  };
  std::vector<float> dx(x.size()), dw(w.size(), 0.f), db(b.size(), 0.f);
  linear_backward(dx.data(), dw.data(), db.data(), weights.data(), x.data(), w.data(), rows, in_f,
                  out_f);
  const double h = 1e-2;
  expect_directional_derivative([&](const std::vector<float>& v) { return loss(v, w, b); }, x,
                                random_vector(x.size(), 17), dx, h, 1e-3, "d/dinp");
  expect_directional_derivative([&](const std::vector<float>& v) { return loss(x, v, b); }, w,
                                random_vector(w.size(), 18), dw, h, 1e-3, "d/dweight");
  expect_directional_derivative([&](const std::vector<float>& v) { return loss(x, w, v); }, b,
                                random_vector(b.size(), 19), db, h, 1e-3, "d/dbias");
}

TEST(Linear, BackwardIsBitIdenticalAcrossThreadCountsAndRuns) {
  const int64_t rows = 1500, in_f = 40, out_f = 150;
  const auto x = random_vector(rows * in_f, 20), w = random_vector(out_f * in_f, 21);
  const auto dout = random_vector(rows * out_f, 22);
  auto run = [&] {
    std::vector<float> dx(x.size()), dw(w.size(), 0.5f), db(out_f, 0.25f);
    linear_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), rows, in_f,
                    out_f);
    return concat(dx, dw, db);
  };
  expect_thread_count_independent(run);
  EXPECT_TRUE(bitwise_equal(run(), run()));
}

}  // namespace
