// Recompute benchmark: one model, every preset side by side in one run (peak activation bytes
// predicted and measured, ms/step, overhead against `none`, recompute FLOP fraction); JSON out.
// usage: bench_recompute [OUT_JSON] [STEPS] [--quick]  (--quick: a small model, the flow only)
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/openmp_wait.h"
#include "trainer/util/format_bytes.h"

namespace {

// The benchmarked model and micro batch, and --quick's.
constexpr bench::ModelShape kModel = {.num_layers = 8,
                                      .hidden_size = 512,
                                      .num_attention_heads = 8,
                                      .vocab_size = 256,
                                      .seq_length = 512};
constexpr int64_t kMicroBatch = 4;
constexpr bench::ModelShape kQuickModel = {.num_layers = 8,
                                           .hidden_size = 128,
                                           .num_attention_heads = 4,
                                           .vocab_size = 256,
                                           .seq_length = 128};
constexpr int64_t kQuickMicroBatch = 2;

struct Preset {
  std::string name;
  std::vector<std::string> overrides;  // recompute.* as `--set` would give them
};

std::vector<std::string> full(const char* method, int64_t num_layers) {
  return {"recompute.granularity=full", std::string("recompute.method=") + method,
          bench::set("recompute.num_layers", num_layers)};
}

std::vector<std::string> selective(const char* modules) {
  return {"recompute.granularity=selective", std::string("recompute.modules=") + modules};
}

// `layers`: the model's; "full uniform N" with N = layers makes one checkpoint group.
std::vector<Preset> presets(int64_t layers) {
  return {
      {"none", {"recompute.granularity=none"}},
      {"selective core_attn", selective("[core_attn]")},
      {"selective act", selective("[act]")},
      {"selective layernorm", selective("[layernorm]")},
      {"selective mlp", selective("[mlp]")},
      {"selective all four", selective("[core_attn, act, layernorm, mlp]")},
      {"full block 4", full("block", 4)},
      {"full uniform 1", full("uniform", 1)},
      {"full uniform 2", full("uniform", 2)},
      {"full uniform " + std::to_string(layers), full("uniform", layers)},
  };
}

// The Trainer of a preset: one microbatch per step, fp32 on the host.
std::vector<std::string> overrides_of(const Preset& preset, const bench::ModelShape& shape,
                                      int64_t micro_batch, const bench::WorkDir& work,
                                      int total_steps) {
  std::vector<std::string> overrides = bench::run_overrides(work, shape);
  overrides.push_back(bench::set("train.micro_batch_size", micro_batch));
  overrides.push_back(bench::set("train.global_batch_size", micro_batch));
  overrides.push_back(bench::set("train.steps", total_steps));
  overrides.insert(overrides.end(), preset.overrides.begin(), preset.overrides.end());
  return overrides;
}

void print_header(const bench::ModelShape& shape, int64_t micro_batch) {
  std::printf(
      "model: %lld layers, hidden %lld, heads %lld, seq %lld, micro batch %lld, dropout 0.1, "
      "fp32\n",
      static_cast<long long>(shape.num_layers), static_cast<long long>(shape.hidden_size),
      static_cast<long long>(shape.num_attention_heads), static_cast<long long>(shape.seq_length),
      static_cast<long long>(micro_batch));
  std::printf("| %-20s | %12s | %12s | %9s | %8s | %10s |\n", "mode", "predicted", "measured",
              "ms/step", "overhead", "recompute");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(22, '-').c_str(), std::string(14, '-').c_str(),
              std::string(14, '-').c_str(), std::string(11, '-').c_str(),
              std::string(10, '-').c_str(), std::string(12, '-').c_str());
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool quick = !args.empty() && args.back() == "--quick";
  if (quick) args.pop_back();
  const std::string out_path = !args.empty() ? args[0] : "bench/recompute.json";
  const int steps = args.size() > 1 ? std::stoi(args[1]) : 2;
  const bench::ModelShape shape = quick ? kQuickModel : kModel;
  const int64_t micro_batch = quick ? kQuickMicroBatch : kMicroBatch;
  const std::vector<Preset> list = presets(shape.num_layers);
  print_header(shape, micro_batch);
  const bench::WorkDir work("bench-recompute");
  bench::write_dataset(work / "data", bench::kDatasetTokens);
  auto run = [&](const Preset& preset, int timed_steps) {
    return bench::run_on_host(overrides_of(preset, shape, micro_batch, work, 1 + timed_steps), 1,
                              timed_steps);
  };
  std::ofstream json(out_path);
  json << "{\"model\": {\"num_layers\": " << shape.num_layers
       << ", \"hidden_size\": " << shape.hidden_size << ", \"heads\": " << shape.num_attention_heads
       << ", \"seq_length\": " << shape.seq_length << ", \"micro_batch\": " << micro_batch
       << "}, \"presets\": [";
  // A first untimed pass of `none` faults in every page the largest plan uses, so
  // the first measured preset pays no more first-touch cost than the others.
  run(list[0], 1);
  double none_ms = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const bench::StepResult r = run(list[i], steps);
    if (i == 0) none_ms = r.step_ms;
    const double overhead = r.step_ms / none_ms - 1.0;
    const double fraction = static_cast<double>(r.recompute_flops) /
                            static_cast<double>(r.model_flops + r.recompute_flops);
    std::printf("| %-20s | %12s | %12s | %9.0f | %7.1f%% | %9.1f%% |\n", list[i].name.c_str(),
                trainer::format_bytes(r.predicted_peak).c_str(),
                trainer::format_bytes(r.activation_peak).c_str(), r.step_ms, 100.0 * overhead,
                100.0 * fraction);
    std::fflush(stdout);
    json << (i ? ", " : "") << "{\"mode\": \"" << list[i].name
         << "\", \"predicted_activation_peak_bytes\": " << r.predicted_peak
         << ", \"measured_activation_peak_bytes\": " << r.activation_peak
         << ", \"ms_per_step\": " << r.step_ms << ", \"overhead_vs_none\": " << overhead
         << ", \"recompute_flop_fraction\": " << fraction << "}";
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
