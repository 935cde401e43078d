// CPU throughput benchmark: OpenBLAS sgemm GFLOP/s on this machine, then the
// trainer's full training step (forward, backward, clip, AdamW) on random tokens
// for the given shapes, side by side in one run. Prints a table and writes JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "runtime/kernels/cpu/gemm.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Best of `repeats` sgemm timings of C(M,N) = A(M,K) B(K,N)^T, the linear-layer shape.
double sgemm_gflops(int64_t M, int64_t N, int64_t K, int repeats) {
  std::vector<float> a(static_cast<size_t>(M * K), 0.01f), b(static_cast<size_t>(N * K), 0.02f),
      c(static_cast<size_t>(M * N));
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    runtime::cpu::sgemm(false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c.data(), N);
    best = std::min(best, seconds(start));
  }
  return 2.0 * static_cast<double>(M * N * K) / best / 1e9;
}

struct Shape {
  const char* name;
  model::GptConfig config;
  int64_t micro_batch;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "bench/cpu.json";
  const int steps = argc > 2 ? std::stoi(argv[2]) : 5;
  const double peak_small = sgemm_gflops(1024, 768, 768, 5);
  const double peak = std::max({peak_small, sgemm_gflops(1024, 3072, 768, 3),
                                sgemm_gflops(2048, 2048, 2048, 3)});
  std::printf("sgemm (OpenBLAS) best GFLOP/s: %.1f  (1024x768x768: %.1f)\n", peak, peak_small);
  const Shape shapes[] = {
      {"L4-H256-V256-b8-s128", bench::gpt(4, 256, 4, 256, 128), 8},
      {"gpt2-124M-b4-s64", bench::gpt(12, 768, 12, 50257, 64), 4},
  };
  std::ofstream json(out_path);
  json << "{\"sgemm_gflops\": " << peak << ", \"shapes\": [";
  std::printf("%-24s %12s %12s %10s %10s %12s\n", "shape", "params", "tokens/s", "ms/step",
              "GFLOP/s", "of sgemm");
  for (size_t i = 0; i < std::size(shapes); ++i) {
    bench::BenchModel model(shapes[i].config, shapes[i].micro_batch);
    const bench::StepResult r = model.run(
        recompute::RecomputePlan::uniform(shapes[i].config.num_layers, {}), 1, steps);
    const int64_t params = model::GptParams::count(shapes[i].config);
    const double tokens_per_s = static_cast<double>(model.tokens_per_step()) / (r.step_ms / 1e3);
    std::printf("%-24s %12lld %12.0f %10.1f %10.1f %11.0f%%\n", shapes[i].name,
                static_cast<long long>(params), tokens_per_s, r.step_ms, r.model_gflops,
                100.0 * r.model_gflops / peak);
    json << (i ? ", " : "") << "{\"name\": \"" << shapes[i].name << "\", \"params\": " << params
         << ", \"tokens_per_s\": " << tokens_per_s << ", \"step_ms\": " << r.step_ms
         << ", \"gflops\": " << r.model_gflops << ", \"fraction_of_sgemm\": " << r.model_gflops / peak
         << "}";
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
