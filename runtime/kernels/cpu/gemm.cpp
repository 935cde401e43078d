// Host GEMMs on OpenBLAS (row-major) and the linear layer built on them.
// Parameter gradients accumulate (+=), input gradients are assigned (=). Never call
// these from inside an OpenMP parallel region (they run their own OpenMP team).
#include "runtime/kernels/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace runtime::cpu {
namespace {

// Note [OpenMP and OpenBLAS threads]
// The kernels use OpenMP; OpenBLAS has its own pthread pool. With two pools on the cores, a
// spinning OpenMP worker held the core OpenBLAS's worker needed next: measured on 2 cores, a
// 1024x384x128 sgemm after any parallel region ran at one-thread speed (1070 us instead of
// 570 us). So OpenBLAS is kept to one thread and the products run on the OpenMP team (Note
// [Host GEMM threads]): its pool stays idle, and the OpenMP workers may spin between regions
// when the process has the cores to itself (Note [OpenMP wait policy], runtime/openmp_wait.h).

// Note [Host GEMM threads]
// OpenBLAS is set to one thread, and each product is split over the OpenMP team here: C's
// rows in ranges of whole kRowBlock blocks, one single-threaded cblas_sgemm per range. With
// OpenBLAS's own threads, the trainer ran two pools on the cores: OpenBLAS's workers wait for
// each other in sched_yield loops and, after each call, hold the cores the next OpenMP region
// needs. A linear's backward runs its two products (dinput and dweight, equal FLOPs) side by
// side, so on 2 threads each runs whole on one thread. Measured on 2 cores (Llama bench shape,
// a loaded machine): about 1.5x faster steps than with OpenBLAS's threads.
// Values: OpenBLAS never splits k, and with its Haswell kernels a call over rows [r, M) with r
// a multiple of 12 gives the same bits as the whole product. Its AVX-512 (Cooperlake) kernels,
// chosen on a Zen 4 VM, did too for splits at multiples of 24 whose pieces each have over 1e6
// multiply-adds (0 of 186 random shapes differed), but mostly not below that: products of up
// to 100^3 multiply-adds there take another kernel, which rounds differently. So a product is
// split only at multiples of kRowBlock = 24 into pieces of over kMinPieceWork multiply-adds
// (four times that size), and a smaller one runs whole on one thread: the results do not
// depend on the thread count (tests/unit/kernels/test_gemm).

blasint blas_dim(int64_t value, const char* name) {
  TRAINER_ASSERT(value >= 0 && value <= INT_MAX,
                 "sgemm " << name << " = " << value << " does not fit OpenBLAS's int");
  return static_cast<blasint>(value);
}

// Column block for the bias reduction: each block is summed by one thread, row by row.
constexpr int64_t kBiasColumnBlock = 64;

// Rows of C per split unit, and the least multiply-adds of a piece (Note [Host GEMM threads]).
constexpr int64_t kRowBlock = 24;
constexpr double kMinPieceWork = 4.0e6;

// One product C(M, N) = alpha * op(A) op(B) + beta * C (row-major, leading dims given).
struct Gemm {
  bool transpose_a;
  bool transpose_b;
  int64_t M, N, K;
  float alpha;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
};

// Rows [row_begin, row_end) of g, on the calling thread (OpenBLAS runs single-threaded).
void gemm_rows(const Gemm& g, int64_t row_begin, int64_t row_end) {
  const int64_t M = row_end - row_begin;
  if (M == 0 || g.N == 0) return;
  float* C = g.C + row_begin * g.ldc;
  if (g.K == 0) {  // C = beta * C; OpenBLAS rejects the zero leading dimensions this may bring.
    for (int64_t i = 0; i < M; ++i) {
      float* row = C + i * g.ldc;
      if (g.beta == 0.f) {
        std::fill(row, row + g.N, 0.f);
      } else {
        for (int64_t j = 0; j < g.N; ++j) row[j] *= g.beta;
      }
    }
    return;
  }
  // Row i of op(A) is row i of A, or column i of A when transposed.
  const float* A = g.A + row_begin * (g.transpose_a ? 1 : g.lda);
  cblas_sgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans,
              g.transpose_b ? CblasTrans : CblasNoTrans, blas_dim(M, "M"), blas_dim(g.N, "N"),
              blas_dim(g.K, "K"), g.alpha, A, blas_dim(g.lda, "lda"), g.B, blas_dim(g.ldb, "ldb"),
              g.beta, C, blas_dim(g.ldc, "ldc"));
}

// One-time switch of OpenBLAS to a single thread (Note [Host GEMM threads]).
void use_single_threaded_blas() {
  static const bool done = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

// Runs the independent products `gemms` on the OpenMP team: each split into row ranges so that
// the ranges of all of them together fill the team (Note [Host GEMM threads]).
void run_gemms(const std::vector<Gemm>& gemms) {
  use_single_threaded_blas();
  struct Range {
    const Gemm* gemm;
    int64_t row_begin, row_end;
  };
  const int64_t threads = omp_get_max_threads();
  const int64_t count = static_cast<int64_t>(gemms.size());
  const int64_t parts_per_gemm = std::max<int64_t>(1, (threads + count - 1) / count);
  std::vector<Range> ranges;
  for (const Gemm& g : gemms) {
    const int64_t blocks = (g.M + kRowBlock - 1) / kRowBlock;
    // Every piece holds at least floor(M / kRowBlock) / parts whole blocks.
    const double block_work = static_cast<double>(kRowBlock) * g.N * g.K;
    const int64_t blocks_per_piece =
        block_work > 0 ? static_cast<int64_t>(kMinPieceWork / block_work) + 1 : 1;
    const int64_t parts =
        std::max<int64_t>(1, std::min(parts_per_gemm, g.M / kRowBlock / blocks_per_piece));
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t begin = std::min(g.M, blocks * p / parts * kRowBlock);
      const int64_t end = std::min(g.M, blocks * (p + 1) / parts * kRowBlock);
      ranges.push_back({&g, begin, end});
    }
  }
  const int64_t n = static_cast<int64_t>(ranges.size());
#pragma omp parallel for schedule(static) if (n > 1)
  for (int64_t i = 0; i < n; ++i)
    gemm_rows(*ranges[i].gemm, ranges[i].row_begin, ranges[i].row_end);
}

}  // namespace

void sgemm(bool transpose_a, bool transpose_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc) {
  run_gemms({{transpose_a, transpose_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc}});
}

void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t rows, int64_t in_features, int64_t out_features) {
  float beta = 0.f;
  if (bias != nullptr) {  // out starts as the bias in every row; the product adds onto it
    const size_t bias_bytes = static_cast<size_t>(out_features) * sizeof(float);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * out_features, bias, bias_bytes);
    beta = 1.f;
  }
  // out(rows, out) = inp(rows, in) W(out, in)^T
  sgemm(false, true, rows, out_features, in_features, 1.f, inp, in_features, weight, in_features,
        beta, out, out_features);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t rows, int64_t in_features, int64_t out_features) {
  // dweight(out, in) += dout^T inp and dinp(rows, in) = dout(rows, out) W(out, in), side by side
  std::vector<Gemm> gemms{{true, false, out_features, in_features, rows, 1.f, dout, out_features,
                           inp, in_features, 1.f, dweight, in_features}};
  if (dinp != nullptr) {
    gemms.push_back({false, false, rows, in_features, out_features, 1.f, dout, out_features, weight,
                     in_features, 0.f, dinp, in_features});
  }
  run_gemms(gemms);
  if (dbias != nullptr) bias_gradient(dbias, dout, rows, out_features);
}

void bias_gradient(float* dbias, const float* dout, int64_t rows, int64_t cols) {
  // Each column block summed over rows in order, in double, then added once.
  const int64_t blocks = (cols + kBiasColumnBlock - 1) / kBiasColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kBiasColumnBlock;
    const int64_t width = std::min(kBiasColumnBlock, cols - c0);
    double sums[kBiasColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = dout + r * cols + c0;
      for (int64_t c = 0; c < width; ++c) sums[c] += row[c];
    }
    for (int64_t c = 0; c < width; ++c) dbias[c0 + c] += static_cast<float>(sums[c]);
  }
}

}  // namespace runtime::cpu
