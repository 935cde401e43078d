// Recompute benchmark: one model, every preset, side by side in one run: peak
// activation bytes (memory model and allocator), ms/step, overhead against
// `none`, and the fraction of FLOPs spent on recompute. Writes JSON.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "trainer/metrics.h"

namespace {

using model::LayerRecompute;
using model::RecomputeMode;
using recompute::RecomputePlan;

struct Preset {
  std::string name;
  RecomputePlan plan;
};

RecomputePlan block(int64_t layers, int64_t full_layers) {
  RecomputePlan plan = RecomputePlan::uniform(layers, {});
  for (int64_t i = 0; i < full_layers; ++i) {
    plan.layers[static_cast<size_t>(i)] = {RecomputeMode::full, {}};
    plan.group[static_cast<size_t>(i)] = i;
  }
  return plan;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "bench/recompute.json";
  const int steps = argc > 2 ? std::stoi(argv[2]) : 2;
  const model::GptConfig config = bench::gpt(8, 512, 8, 256, 512);
  const int64_t micro_batch = 4, L = config.num_layers;
  auto selective = [&](model::SelectiveModules m) {
    return RecomputePlan::uniform(L, LayerRecompute{RecomputeMode::selective, m});
  };
  const LayerRecompute full{RecomputeMode::full, {}};
  const std::vector<Preset> presets = {
      {"none", RecomputePlan::uniform(L, {})},
      {"selective core_attn", selective({.core_attn = true})},
      {"selective act", selective({.act = true})},
      {"selective layernorm", selective({.layernorm = true})},
      {"selective mlp", selective({.mlp = true})},
      {"selective all four", selective({.core_attn = true, .act = true, .layernorm = true, .mlp = true})},
      {"full block 4", block(L, 4)},
      {"full uniform 1", RecomputePlan::uniform(L, full, 1)},
      {"full uniform 2", RecomputePlan::uniform(L, full, 2)},
      {"full uniform 8", RecomputePlan::uniform(L, full, L)},
  };
  std::printf("model: %lld layers, hidden %lld, heads %lld, seq %lld, micro batch %lld, dropout 0.1, fp32\n",
              static_cast<long long>(L), static_cast<long long>(config.hidden_size),
              static_cast<long long>(config.num_attention_heads),
              static_cast<long long>(config.seq_length), static_cast<long long>(micro_batch));
  std::printf("| %-20s | %12s | %12s | %9s | %8s | %10s |\n", "mode", "predicted", "measured",
              "ms/step", "overhead", "recompute");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(22, '-').c_str(), std::string(14, '-').c_str(),
              std::string(14, '-').c_str(), std::string(11, '-').c_str(),
              std::string(10, '-').c_str(), std::string(12, '-').c_str());
  bench::BenchModel model(config, micro_batch);
  std::ofstream json(out_path);
  json << "{\"model\": {\"num_layers\": " << L << ", \"hidden_size\": " << config.hidden_size
       << ", \"heads\": " << config.num_attention_heads << ", \"seq_length\": " << config.seq_length
       << ", \"micro_batch\": " << micro_batch << "}, \"presets\": [";
  // A first untimed pass of `none` faults in every page the largest plan uses, so
  // the first measured preset pays no more first-touch cost than the others.
  model.run(presets[0].plan, 1, 1);
  double none_ms = 0;
  for (size_t i = 0; i < presets.size(); ++i) {
    const bench::StepResult r = model.run(presets[i].plan, 1, steps);
    if (i == 0) none_ms = r.step_ms;
    const double overhead = r.step_ms / none_ms - 1.0;
    const double fraction = static_cast<double>(r.recompute_flops) /
                            static_cast<double>(r.model_flops + r.recompute_flops);
    std::printf("| %-20s | %12s | %12s | %9.0f | %7.1f%% | %9.1f%% |\n", presets[i].name.c_str(),
                trainer::format_bytes(r.predicted_peak).c_str(),
                trainer::format_bytes(r.activation_peak).c_str(), r.step_ms, 100.0 * overhead,
                100.0 * fraction);
    std::fflush(stdout);
    json << (i ? ", " : "") << "{\"mode\": \"" << presets[i].name
         << "\", \"predicted_activation_peak_bytes\": " << r.predicted_peak
         << ", \"measured_activation_peak_bytes\": " << r.activation_peak
         << ", \"ms_per_step\": " << r.step_ms << ", \"overhead_vs_none\": " << overhead
         << ", \"recompute_flop_fraction\": " << fraction << "}";
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
