// The GEMMs of one Llama training step alone, through the trainer's own host linears
// (runtime::cpu::linear_forward / linear_backward: OpenBLAS, split over the OpenMP team as a
// step runs them): every layer's qkv, attention output, gate|up and down, and the head, each
// forward and backward (input and weight gradients side by side). Their sum is the least time a
// step can take with these products, whatever the rest of the step costs; scripts/
// bench_llama_cpu.sh runs it beside the trainer and PyTorch in each round.
// Usage: bench_step_gemms LAYERS HIDDEN HEADS GROUPS FFN SEQ MICRO_BATCH VOCAB [REPEATS]
// Prints one JSON object: {"gemm_ms": median over the repeats of the step's GEMM time,
// "gemm_gflop": the FLOPs they do, "repeats": N}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/gemm.h"
#include "runtime/openmp_wait.h"

namespace {

// One linear of the step, `count` times in it: rows x in_features -> out_features, with its
// buffers.
struct Linear {
  double count;
  int64_t in_features, out_features;
  std::vector<float> weight, weight_grad, inp, out, dinp;
};

Linear make_linear(double count, int64_t rows, int64_t in_features, int64_t out_features) {
  const auto size = [](int64_t a, int64_t b) { return static_cast<size_t>(a * b); };
  return {count,
          in_features,
          out_features,
          std::vector<float>(size(out_features, in_features), 0.01f),
          std::vector<float>(size(out_features, in_features), 0.f),
          std::vector<float>(size(rows, in_features), 0.02f),
          std::vector<float>(size(rows, out_features), 0.f),
          std::vector<float>(size(rows, in_features), 0.f)};
}

int64_t argument(char** argv, int index) {
  return std::stoll(argv[index]);
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  if (argc < 9) {
    std::fprintf(stderr,
                 "usage: bench_step_gemms LAYERS HIDDEN HEADS GROUPS FFN SEQ MICRO_BATCH VOCAB "
                 "[REPEATS]\n");
    return 2;
  }
  const int64_t layers = argument(argv, 1), hidden = argument(argv, 2), heads = argument(argv, 3),
                groups = argument(argv, 4), ffn = argument(argv, 5), seq = argument(argv, 6),
                micro = argument(argv, 7), vocab = argument(argv, 8);
  const int repeats = argc > 9 ? std::stoi(argv[9]) : 10;
  const int64_t rows = seq * micro, head_dim = hidden / heads;
  // One layer's linears (the layers are alike: each is timed once and counted `layers` times),
  // then the head.
  const auto per_layer = static_cast<double>(layers);
  std::vector<Linear> linears;
  linears.push_back(make_linear(per_layer, rows, hidden, (heads + 2 * groups) * head_dim));
  linears.push_back(make_linear(per_layer, rows, heads * head_dim, hidden));
  linears.push_back(make_linear(per_layer, rows, hidden, 2 * ffn));
  linears.push_back(make_linear(per_layer, rows, ffn, hidden));
  linears.push_back(make_linear(1, rows, hidden, vocab));
  double flop = 0;
  for (const Linear& l : linears)
    flop += l.count * 6.0 * static_cast<double>(rows * l.in_features * l.out_features);
  std::vector<double> totals;
  for (int repeat = 0; repeat < repeats + 1; ++repeat) {  // the first warms up
    double total = 0;
    for (Linear& l : linears) {
      const auto start = std::chrono::steady_clock::now();
      runtime::cpu::linear_forward(l.out.data(), l.inp.data(), l.weight.data(), nullptr, rows,
                                   l.in_features, l.out_features);
      runtime::cpu::linear_backward(l.dinp.data(), l.weight_grad.data(), nullptr, l.out.data(),
                                    l.inp.data(), l.weight.data(), rows, l.in_features,
                                    l.out_features);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      total += l.count * seconds;
    }
    if (repeat > 0) totals.push_back(total);
  }
  std::sort(totals.begin(), totals.end());
  std::printf("{\"gemm_ms\": %.3f, \"gemm_gflop\": %.4f, \"repeats\": %d}\n",
              totals[totals.size() / 2] * 1e3, flop / 1e9, repeats);
  return 0;
}
