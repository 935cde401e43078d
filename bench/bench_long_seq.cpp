// Long-sequence benchmark: under one activation budget, the longest sequence each attention
// backend and recompute preset trains (memory model to search, one measured step to confirm),
// then flash against unfused throughput at fixed lengths; JSON out. Numbers are not asserted.
// usage: bench_long_seq [OUT_JSON] [BUDGET_MIB]
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/openmp_wait.h"
#include "trainer/config/config.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/util/format_bytes.h"

namespace {

constexpr bench::ModelShape kModel = {
    .num_layers = 4, .hidden_size = 256, .num_attention_heads = 4, .vocab_size = 256};
constexpr int64_t kDefaultBudgetMib = 512;
constexpr int64_t kLongestCandidate = 131072;

struct Preset {
  std::string name;
  std::vector<std::string> overrides;
};

std::vector<Preset> presets() {
  const std::vector<std::string> none = {"recompute.granularity=none"};
  const std::vector<std::string> selective = {"recompute.granularity=selective",
                                              "recompute.modules=[core_attn]"};
  const std::vector<std::string> full = {"recompute.granularity=full", "recompute.method=uniform",
                                         "recompute.num_layers=1"};
  std::vector<Preset> list;
  for (const char* backend : {"unfused", "flash"}) {
    const std::string key = std::string("model.attention_backend=") + backend;
    for (const auto& [name, recompute] :
         {std::pair{"none", none}, std::pair{"selective core_attn", selective},
          std::pair{"full uniform 1", full}}) {
      Preset preset{std::string(backend) + " " + name, recompute};
      preset.overrides.push_back(key);
      list.push_back(preset);
    }
  }
  // The same shape as a Llama block (RMSNorm, SwiGLU 688 wide, RoPE, 4 heads sharing 2 kv
  // heads, untied head) under flash with recompute: what GQA and the wider MLP do to the
  // longest sequence.
  const std::vector<std::string> llama = {"model.architecture=llama", "model.num_query_groups=2",
                                          "model.ffn_hidden_size=688",
                                          "model.attention_backend=flash"};
  for (const auto& [name, recompute] : {std::pair{"llama flash selective core_attn", selective},
                                        std::pair{"llama flash full uniform 1", full}}) {
    Preset preset{name, llama};
    preset.overrides.insert(preset.overrides.end(), recompute.begin(), recompute.end());
    list.push_back(preset);
  }
  return list;
}

// Powers of two and their midpoints: 256, 384, 512, 768, ...
std::vector<int64_t> candidate_lengths() {
  std::vector<int64_t> lengths;
  for (int64_t s = 256; s <= kLongestCandidate; s *= 2) {
    lengths.push_back(s);
    if (s * 3 / 2 <= kLongestCandidate) lengths.push_back(s * 3 / 2);
  }
  return lengths;
}

// The Trainer of one preset at one length: micro batch 1, fp32 on the host.
std::vector<std::string> overrides_of(const Preset& preset, int64_t seq, const bench::WorkDir& work,
                                      int total_steps) {
  bench::ModelShape shape = kModel;
  shape.seq_length = seq;
  std::vector<std::string> overrides = bench::run_overrides(work, shape);
  overrides.insert(overrides.end(), {"train.micro_batch_size=1", "train.global_batch_size=1",
                                     bench::set("train.steps", total_steps)});
  overrides.insert(overrides.end(), preset.overrides.begin(), preset.overrides.end());
  return overrides;
}

// The longest candidate whose predicted activation peak fits the budget (0: none fits). The
// prediction grows with the length, so the search stops at the first that does not fit.
int64_t longest_fitting(const Preset& preset, int64_t budget, const bench::WorkDir& work) {
  int64_t best = 0;
  for (const int64_t seq : candidate_lengths()) {
    const trainer::Config config =
        trainer::parse_config("", "bench", overrides_of(preset, seq, work, 1));
    if (trainer::make_stage_setup(config, 0, 0).predicted_activation_peak > budget) break;
    best = seq;
  }
  return best;
}

void longest_sequences(int64_t budget, const bench::WorkDir& work, std::ofstream& json) {
  std::printf(
      "activation budget %s; the longest length (powers of two and midpoints) whose "
      "predicted peak fits, then one measured step there\n",
      trainer::format_bytes(budget).c_str());
  std::printf("| %-31s | %8s | %12s | %12s | %9s |\n", "backend, recompute", "seq", "predicted",
              "measured", "tokens/s");
  json << "\"longest\": [";
  const char* separator = "";
  for (const Preset& preset : presets()) {
    const int64_t seq = longest_fitting(preset, budget, work);
    if (seq == 0) continue;
    const bench::StepResult r = bench::run_on_host(overrides_of(preset, seq, work, 1), 0, 1);
    std::printf("| %-31s | %8lld | %12s | %12s | %9.0f |%s\n", preset.name.c_str(),
                static_cast<long long>(seq), trainer::format_bytes(r.predicted_peak).c_str(),
                trainer::format_bytes(r.activation_peak).c_str(), bench::tokens_per_s(seq, r),
                r.predicted_peak == r.activation_peak ? "" : "  measured != predicted");
    std::fflush(stdout);
    json << separator << "{\"preset\": \"" << preset.name << "\", \"seq_length\": " << seq
         << ", \"predicted_activation_peak_bytes\": " << r.predicted_peak
         << ", \"measured_activation_peak_bytes\": " << r.activation_peak
         << ", \"tokens_per_s\": " << bench::tokens_per_s(seq, r) << "}";
    separator = ", ";
  }
  json << "]";
}

void throughput(const bench::WorkDir& work, std::ofstream& json) {
  std::printf("\nno recompute, micro batch 1: tokens/s (1 warm-up step, then the mean of 2)\n");
  std::printf("| %8s | %9s | %9s | %11s |\n", "seq", "unfused", "flash", "flash/unf.");
  json << ", \"throughput\": [";
  const std::vector<Preset> list = presets();
  const Preset& unfused = list[0];
  const Preset& flash = list[3];
  const char* separator = "";
  for (const int64_t seq : {256, 1024, 4096}) {
    const double u =
        bench::tokens_per_s(seq, bench::run_on_host(overrides_of(unfused, seq, work, 3), 1, 2));
    const double f =
        bench::tokens_per_s(seq, bench::run_on_host(overrides_of(flash, seq, work, 3), 1, 2));
    std::printf("| %8lld | %9.0f | %9.0f | %10.2fx |\n", static_cast<long long>(seq), u, f, f / u);
    std::fflush(stdout);
    json << separator << "{\"seq_length\": " << seq << ", \"unfused_tokens_per_s\": " << u
         << ", \"flash_tokens_per_s\": " << f << "}";
    separator = ", ";
  }
  json << "]";
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  const std::string out_path = argc > 1 ? argv[1] : "bench/long_seq.json";
  const int64_t budget = (argc > 2 ? std::stoll(argv[2]) : kDefaultBudgetMib) << 20;
  std::printf(
      "model: %lld layers, hidden %lld, heads %lld, vocab %lld, micro batch 1, "
      "dropout 0.1, fp32\n",
      static_cast<long long>(kModel.num_layers), static_cast<long long>(kModel.hidden_size),
      static_cast<long long>(kModel.num_attention_heads),
      static_cast<long long>(kModel.vocab_size));
  const bench::WorkDir work("bench-long-seq");
  bench::write_dataset(work / "data", 4 * kLongestCandidate);
  std::ofstream json(out_path);
  json << "{\"budget_bytes\": " << budget << ", ";
  longest_sequences(budget, work, json);
  throughput(work, json);
  json << "}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
