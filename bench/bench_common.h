// Shared by the benchmarks: every configuration they measure is a trainer::Trainer, built from
// `--set` overrides over a synthetic dataset in a temporary folder and stepped with its own
// train_step(), so a benchmark times exactly what training runs. Numbers are never asserted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bench {

// A temporary folder for the dataset and the trainer's run directory, removed at the end.
class WorkDir {
 public:
  explicit WorkDir(const std::string& name);  // <tmp>/<name>-<pid>
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A synthetic corpus of `num_tokens` at `prefix` (.bin/.idx): a few distinct token values, all
// below any vocabulary here (the model's vocabulary, not the data, sets the cost of the head).
void write_dataset(const std::string& prefix, int64_t num_tokens);
// Enough for the CPU benchmarks' steps several times over (the sampler wraps around anyway).
constexpr int64_t kDatasetTokens = int64_t{1} << 20;

// "key=value" as `--set` takes it, for a number.
template <class Number>
std::string set(const char* key, Number value) {
  return std::string(key) + "=" + std::to_string(value);
}

// The model of a benchmark, with Megatron's GPT pretraining dropout (0.1; its masks are stash).
struct ModelShape {
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t vocab_size = 0;
  int64_t seq_length = 0;
};
constexpr double kDropout = 0.1;

// What every benchmark's Trainer is given: the model of `shape`, the dataset at work/"data", its
// run directory at work/"run", the whole dataset for training, no validation, no export.
std::vector<std::string> run_overrides(const WorkDir& work, const ModelShape& shape);

// The attention benchmarks' run (bench_window, bench_documents): run_overrides of `shape` as a
// Llama block (2 kv heads, ffn 688) under flash attention, micro batch 1, no recompute, `steps`
// steps.
std::vector<std::string> llama_flash_overrides(const WorkDir& work, const ModelShape& shape,
                                               int steps);
// Their first line: the model as llama_flash_overrides runs it, `what` varies, and the steps.
void print_llama_flash_model(const ModelShape& shape, const std::string& what, int warmup,
                             int steps);

// One Trainer on the host.
struct StepResult {
  int64_t parameters = 0;        // of the whole model
  double step_ms = 0;            // mean over the timed steps
  double model_gflops = 0;       // model FLOPs per second / 1e9, over the timed steps
  int64_t model_flops = 0;       // per step (the trainer's stage setup)
  int64_t recompute_flops = 0;   // per step, as the executors counted them
  int64_t activation_peak = 0;   // measured by the allocator, bytes
  int64_t predicted_peak = 0;    // the trainer's memory prediction, bytes
  double predicted_step_ms = 0;  // the trainer's step-time prediction
};

// Builds a Trainer on a host allocator from `overrides`, runs `warmup` untimed steps and then
// `steps` timed ones (the config's train.steps should cover both), and destroys it.
StepResult run_on_host(const std::vector<std::string>& overrides, int warmup, int steps);

// Tokens per second of a step of `r` over one sequence of `seq` positions (micro batch 1).
double tokens_per_s(int64_t seq, const StepResult& r);

}  // namespace bench
