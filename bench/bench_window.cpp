// Sliding-window benchmark: tokens/s of one Llama-shaped model under flash attention with and
// without a sliding window (model.sliding_window), side by side at each length, and each run's
// activation peak (the window skips the key tiles no query sees, and keeps every buffer's size);
// JSON out. Numbers are not asserted.
// usage: bench_window [OUT_JSON] [WINDOW]
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/openmp_wait.h"
#include "trainer/util/format_bytes.h"

namespace {

constexpr bench::ModelShape kModel = {
    .num_layers = 4, .hidden_size = 256, .num_attention_heads = 4, .vocab_size = 256};
constexpr int64_t kDefaultWindow = 512;
constexpr int kWarmupSteps = 1, kTimedSteps = 2;

// The run at `seq` with `window` (0: none): micro batch 1, fp32 on the host, flash, no recompute.
std::vector<std::string> overrides_of(int64_t seq, int64_t window, const bench::WorkDir& work) {
  bench::ModelShape shape = kModel;
  shape.seq_length = seq;
  std::vector<std::string> overrides =
      bench::llama_flash_overrides(work, shape, kWarmupSteps + kTimedSteps);
  overrides.push_back(bench::set("model.sliding_window", window));
  return overrides;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  const std::string out_path = argc > 1 ? argv[1] : "bench/window.json";
  const int64_t window = argc > 2 ? std::stoll(argv[2]) : kDefaultWindow;
  bench::print_llama_flash_model(kModel, "window " + std::to_string(window), kWarmupSteps,
                                 kTimedSteps);
  const bench::WorkDir work("bench-window");
  bench::write_dataset(work / "data", bench::kDatasetTokens);
  std::printf("| %6s | %14s | %14s | %8s | %12s | %12s |\n", "seq", "full tokens/s",
              "window tokens/s", "speedup", "full peak", "window peak");
  std::ofstream json(out_path);
  json << "{\"window\": " << window << ", \"rows\": [";
  const char* separator = "";
  for (const int64_t seq : {1024, 2048, 4096, 8192}) {
    const bench::StepResult full =
        bench::run_on_host(overrides_of(seq, 0, work), kWarmupSteps, kTimedSteps);
    const bench::StepResult windowed =
        bench::run_on_host(overrides_of(seq, window, work), kWarmupSteps, kTimedSteps);
    const double f = bench::tokens_per_s(seq, full), w = bench::tokens_per_s(seq, windowed);
    std::printf("| %6lld | %14.0f | %14.0f | %7.2fx | %12s | %12s |\n", static_cast<long long>(seq),
                f, w, w / f, trainer::format_bytes(full.activation_peak).c_str(),
                trainer::format_bytes(windowed.activation_peak).c_str());
    std::fflush(stdout);
    json << separator << "{\"seq_length\": " << seq << ", \"full_tokens_per_s\": " << f
         << ", \"window_tokens_per_s\": " << w
         << ", \"full_activation_peak_bytes\": " << full.activation_peak
         << ", \"window_activation_peak_bytes\": " << windowed.activation_peak
         << ", \"full_model_gflops\": " << full.model_gflops
         << ", \"window_model_gflops\": " << windowed.model_gflops << "}";
    separator = ", ";
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
