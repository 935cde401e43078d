// CPU peak rates: the stated one from the CPU's description, the measured one from sgemm.
#include "trainer/mfu_peak.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/gemm.h"

namespace trainer {
namespace {

constexpr int kFmaUnitsPerCore = 2;  // every x86 server core since Haswell / Zen 2
constexpr int kFlopsPerFma = 2;

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int f32_lanes() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx")) return 8;
#endif
  return 4;
}

// The highest clock the CPU states, GHz; 0 when none is stated.
double max_clock_ghz() {
  std::ifstream max_freq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (max_freq >> khz && khz > 0) return khz / 1e6;
  std::ifstream cpuinfo("/proc/cpuinfo");
  double mhz = 0;
  for (std::string line; std::getline(cpuinfo, line);) {
    double value = 0;
    if (line.rfind("cpu MHz", 0) == 0 && std::sscanf(line.c_str(), "cpu MHz : %lf", &value) == 1)
      mhz = std::max(mhz, value);
  }
  return mhz / 1e3;
}

}  // namespace

std::optional<PeakRate> stated_cpu_peak() {
  const double ghz = max_clock_ghz();
  if (ghz <= 0) return std::nullopt;
  const int cores = cores_available(), lanes = f32_lanes();
  char source[160];
  std::snprintf(source, sizeof source,
                "stated peak: %d cores x %d FMA units x %d f32 lanes x %d FLOP x %.2f GHz", cores,
                kFmaUnitsPerCore, lanes, kFlopsPerFma, ghz);
  return PeakRate{cores * kFmaUnitsPerCore * lanes * kFlopsPerFma * ghz, source};
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
  const double measured = measure_sgemm_gflops();
  const std::optional<PeakRate> stated = stated_cpu_peak();
  if (stated && stated->gflops >= measured) return *stated;
  return {measured, "OpenBLAS sgemm measured on this machine, best of 5" +
                        std::string(stated ? " (above the " + stated->source + ")" : "")};
}

}  // namespace trainer
