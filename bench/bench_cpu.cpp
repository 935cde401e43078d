// CPU throughput benchmark: OpenBLAS sgemm GFLOP/s on this machine, then the
// trainer's full training step (forward, backward, clip, AdamW) on random tokens
// for the given shapes, side by side in one run. Prints a table and writes JSON.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/flops.h"
#include "recompute/executor.h"
#include "runtime/kernels/cpu/gemm.h"
#include "trainer/optimizer.h"

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

struct Result {
  double tokens_per_s, gflops, step_ms;
  int64_t params;
};

Result train_throughput(const Shape& shape, int warmup, int steps) {
  runtime::CpuAllocator allocator;
  const model::GptConfig& config = shape.config;
  auto params = model::GptParams::allocate(allocator, config, runtime::MemoryCategory::param);
  model::init_params(params, config, 1);
  auto grads = model::GptParams::allocate(allocator, config, runtime::MemoryCategory::grad);
  trainer::AdamW adamw(params, allocator);
  trainer::OptimizerConfig optimizer;
  const int64_t T = config.seq_length, B = shape.micro_batch;
  recompute::ChunkExecutor chunk(config, params, grads,
                                 recompute::RecomputePlan::uniform(config.num_layers, {}), B,
                                 allocator);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size) - 1);
  auto microbatch = [&]() {
    recompute::Microbatch mb;
    mb.tokens = runtime::Tensor::empty(allocator, {T, B}, runtime::DType::i32,
                                       runtime::MemoryCategory::activation);
    mb.targets = runtime::Tensor::empty(allocator, {T, B}, runtime::DType::i32,
                                        runtime::MemoryCategory::activation);
    for (int64_t i = 0; i < T * B; ++i) mb.tokens.i32()[i] = token(rng), mb.targets.i32()[i] = token(rng);
    return mb;
  };
  const float scale = 1.0f / static_cast<float>(T * B);
  double total = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    const auto start = Clock::now();
    grads.flat.zero_();
    chunk.forward_step(microbatch(), {1, s + 1});
    chunk.backward_step(scale);
    const double norm = trainer::global_grad_norm(grads);
    trainer::clip_gradients(grads, norm, 1.0);
    adamw.step(params, grads, optimizer, 1e-4, s + 1);
    if (s >= warmup) total += seconds(start);
  }
  const model::LayerDims dims = recompute::layer_dims(config, B, true);
  const double flops = 3.0 * static_cast<double>(config.num_layers * model::layer_forward_flops(dims).total() +
                                                 model::head_forward_flops(dims, config.padded_vocab()));
  const double per_step = total / steps;
  return {static_cast<double>(T * B) / per_step, flops / per_step / 1e9, per_step * 1e3,
          model::GptParams::count(config)};
}

model::GptConfig gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t seq) {
  model::GptConfig c;
  c.num_layers = layers;
  c.hidden_size = hidden;
  c.num_attention_heads = heads;
  c.vocab_size = vocab;
  c.seq_length = seq;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "bench/cpu.json";
  const int steps = argc > 2 ? std::stoi(argv[2]) : 5;
  const double peak_small = sgemm_gflops(1024, 768, 768, 5);
  const double peak = std::max({peak_small, sgemm_gflops(1024, 3072, 768, 3),
                                sgemm_gflops(2048, 2048, 2048, 3)});
  std::printf("sgemm (OpenBLAS) best GFLOP/s: %.1f  (1024x768x768: %.1f)\n", peak, peak_small);
  const Shape shapes[] = {
      {"L4-H256-V256-b8-s128", gpt(4, 256, 4, 256, 128), 8},
      {"gpt2-124M-b4-s64", gpt(12, 768, 12, 50257, 64), 4},
  };
  std::ofstream json(out_path);
  json << "{\"sgemm_gflops\": " << peak << ", \"shapes\": [";
  std::printf("%-24s %12s %12s %10s %10s %12s\n", "shape", "params", "tokens/s", "ms/step",
              "GFLOP/s", "of sgemm");
  for (size_t i = 0; i < std::size(shapes); ++i) {
    const Result r = train_throughput(shapes[i], 1, steps);
    std::printf("%-24s %12lld %12.0f %10.1f %10.1f %11.0f%%\n", shapes[i].name,
                static_cast<long long>(r.params), r.tokens_per_s, r.step_ms, r.gflops,
                100.0 * r.gflops / peak);
    json << (i ? ", " : "") << "{\"name\": \"" << shapes[i].name << "\", \"params\": " << r.params
         << ", \"tokens_per_s\": " << r.tokens_per_s << ", \"step_ms\": " << r.step_ms
         << ", \"gflops\": " << r.gflops << ", \"fraction_of_sgemm\": " << r.gflops / peak << "}";
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
