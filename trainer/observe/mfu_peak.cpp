// CPU peak rates, both measured: the FMA throughput of every core, and OpenBLAS sgemm.
#include "trainer/observe/mfu_peak.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/gemm.h"

namespace trainer {
namespace {

constexpr int kChains = 12;              // independent FMA chains: latency x units on every core
constexpr int64_t kChainSteps = 250000;  // ~10 ms of FMAs per thread
constexpr int kFlopsPerFma = 2;

// kChainSteps rounds of kChains independent FMAs on the widest vectors, written with intrinsics
// so that no compiler setting splits them into a multiply and an add. Each returns a value that
// depends on every chain, so that none is dropped.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_chains_avx512() {
  __m512 acc[kChains];
  for (int chain = 0; chain < kChains; ++chain) acc[chain] = _mm512_set1_ps(1.0f + float(chain));
  const __m512 scale = _mm512_set1_ps(0.999999f), shift = _mm512_set1_ps(1e-6f);
  for (int64_t step = 0; step < kChainSteps; ++step) {
#pragma GCC unroll 12
    for (int chain = 0; chain < kChains; ++chain)
      acc[chain] = _mm512_fmadd_ps(acc[chain], scale, shift);
  }
  float sum = 0;
  for (int chain = 0; chain < kChains; ++chain) sum += _mm512_cvtss_f32(acc[chain]);
  return sum;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2() {
  __m256 acc[kChains];
  for (int chain = 0; chain < kChains; ++chain) acc[chain] = _mm256_set1_ps(1.0f + float(chain));
  const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-6f);
  for (int64_t step = 0; step < kChainSteps; ++step) {
#pragma GCC unroll 12
    for (int chain = 0; chain < kChains; ++chain)
      acc[chain] = _mm256_fmadd_ps(acc[chain], scale, shift);
  }
  float sum = 0;
  for (int chain = 0; chain < kChains; ++chain) sum += _mm256_cvtss_f32(acc[chain]);
  return sum;
}
#endif

// The widest FMA the CPU has: its f32 lanes and its chain runner; {0, nullptr} when none.
struct FmaKind {
  int lanes = 0;
  float (*run)() = nullptr;
  const char* name = "";
};

FmaKind widest_fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {16, fma_chains_avx512, "AVX-512"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {8, fma_chains_avx2, "AVX2"};
#endif
  return {};
}

}  // namespace

std::optional<PeakRate> measure_fma_peak(int repeats) {
  const FmaKind kind = widest_fma();
  if (!kind.run) return std::nullopt;
  using Clock = std::chrono::steady_clock;
  double best_gflops = 0;
  int threads = 1;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    float sink = 0;
    const auto start = Clock::now();
#pragma omp parallel reduction(+ : sink)
    {
      sink += kind.run();
#pragma omp single
      threads = omp_get_num_threads();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (sink == -1.f) return std::nullopt;  // never: keeps the chains' results alive
    const double flops = double(threads) * kChainSteps * kChains * kind.lanes * kFlopsPerFma;
    best_gflops = std::max(best_gflops, flops / seconds / 1e9);
  }
  char source[160];
  std::snprintf(source, sizeof source,
                "FMA throughput measured on this machine: %d threads x %d %s chains, best of %d",
                threads, kChains, kind.name, repeats);
  return PeakRate{best_gflops, source};
}

double measure_sgemm_gflops(int repeats) {
  using Clock = std::chrono::steady_clock;
  constexpr int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 1e30;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    const auto start = Clock::now();
    runtime::cpu::sgemm(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 2.0 * n * n * n / best / 1e9;
}

PeakRate cpu_mfu_peak() {
  const double sgemm = measure_sgemm_gflops();
  const std::optional<PeakRate> fma = measure_fma_peak();
  if (fma && fma->gflops >= sgemm) return *fma;
  return {sgemm, "OpenBLAS sgemm measured on this machine, best of 5" +
                     std::string(fma ? " (above the " + fma->source + ")" : "")};
}

}  // namespace trainer
