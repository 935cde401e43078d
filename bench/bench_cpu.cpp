// CPU throughput benchmark: OpenBLAS sgemm GFLOP/s on this machine, then the Trainer's
// training step (forward, backward, clip, AdamW) on synthetic tokens for the given shapes,
// side by side in one run. Prints a table and writes JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/openmp_wait.h"

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
  bench::ModelShape model;
  int64_t micro_batch;  // one microbatch per step
};

// The Trainer of a shape: no recompute, fp32 on the host.
std::vector<std::string> overrides_of(const Shape& shape, const bench::WorkDir& work,
                                      int total_steps) {
  std::vector<std::string> overrides = bench::run_overrides(work, shape.model);
  overrides.push_back(bench::set("train.micro_batch_size", shape.micro_batch));
  overrides.push_back(bench::set("train.global_batch_size", shape.micro_batch));
  overrides.push_back(bench::set("train.steps", total_steps));
  overrides.push_back("recompute.granularity=none");
  return overrides;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  const std::string out_path = argc > 1 ? argv[1] : "bench/cpu.json";
  const int steps = argc > 2 ? std::stoi(argv[2]) : 5;
  const double peak_small = sgemm_gflops(1024, 768, 768, 5);
  const double peak =
      std::max({peak_small, sgemm_gflops(1024, 3072, 768, 3), sgemm_gflops(2048, 2048, 2048, 3)});
  std::printf("sgemm (OpenBLAS) best GFLOP/s: %.1f  (1024x768x768: %.1f)\n", peak, peak_small);
  const Shape shapes[] = {
      {.name = "L4-H256-V256-b8-s128",
       .model = {.num_layers = 4,
                 .hidden_size = 256,
                 .num_attention_heads = 4,
                 .vocab_size = 256,
                 .seq_length = 128},
       .micro_batch = 8},
      {.name = "gpt2-124M-b4-s64",
       .model = {.num_layers = 12,
                 .hidden_size = 768,
                 .num_attention_heads = 12,
                 .vocab_size = 50257,
                 .seq_length = 64},
       .micro_batch = 4},
  };
  const bench::WorkDir work("bench-cpu");
  bench::write_dataset(work / "data", bench::kDatasetTokens);
  std::ofstream json(out_path);
  json << "{\"sgemm_gflops\": " << peak << ", \"shapes\": [";
  std::printf("%-24s %12s %12s %10s %10s %12s\n", "shape", "params", "tokens/s", "ms/step",
              "GFLOP/s", "of sgemm");
  for (size_t i = 0; i < std::size(shapes); ++i) {
    const bench::StepResult r =
        bench::run_on_host(overrides_of(shapes[i], work, 1 + steps), 1, steps);
    const int64_t tokens_per_step = shapes[i].model.seq_length * shapes[i].micro_batch;
    const double tokens_per_s = static_cast<double>(tokens_per_step) / (r.step_ms / 1e3);
    std::printf("%-24s %12lld %12.0f %10.1f %10.1f %11.0f%%\n", shapes[i].name,
                static_cast<long long>(r.parameters), tokens_per_s, r.step_ms, r.model_gflops,
                100.0 * r.model_gflops / peak);
    json << (i ? ", " : "") << "{\"name\": \"" << shapes[i].name
         << "\", \"params\": " << r.parameters << ", \"tokens_per_s\": " << tokens_per_s
         << ", \"step_ms\": " << r.step_ms << ", \"gflops\": " << r.model_gflops
         << ", \"fraction_of_sgemm\": " << r.model_gflops / peak << "}";
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
