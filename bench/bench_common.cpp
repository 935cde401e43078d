// The benchmarks' shared setup: work folder, dataset, overrides, and a host Trainer's timed
// steps. The timing is the Trainer's own (StepMetrics::step_ms): one step, end to end.
#include "bench/bench_common.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/run/train.h"

namespace bench {

WorkDir::WorkDir(const std::string& name)
    : path_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
  std::filesystem::create_directories(path_);
}

WorkDir::~WorkDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_dataset(const std::string& prefix, int64_t num_tokens) {
  trainer::SyntheticCorpusSpec corpus_spec;
  corpus_spec.num_tokens = num_tokens;
  const trainer::SyntheticCorpus corpus = trainer::make_synthetic_corpus(corpus_spec);
  trainer::IndexedDatasetWriter writer(prefix, trainer::TokenDType::uint16);
  writer.add_document(corpus.tokens);
  writer.finish();
}

std::vector<std::string> llama_flash_overrides(const WorkDir& work, const ModelShape& shape,
                                               int steps) {
  std::vector<std::string> overrides = run_overrides(work, shape);
  overrides.insert(overrides.end(), {"model.architecture=llama", "model.num_query_groups=2",
                                     "model.ffn_hidden_size=688", "model.attention_backend=flash",
                                     "train.micro_batch_size=1", "train.global_batch_size=1",
                                     set("train.steps", steps)});
  return overrides;
}

void print_llama_flash_model(const ModelShape& shape, const std::string& what, int warmup,
                             int steps) {
  std::printf(
      "model: llama, %lld layers, hidden %lld, heads %lld (2 kv), vocab %lld, micro batch 1, "
      "dropout %.1f, fp32, flash, no recompute; %s; %d warm-up step, then the mean of %d\n",
      static_cast<long long>(shape.num_layers), static_cast<long long>(shape.hidden_size),
      static_cast<long long>(shape.num_attention_heads), static_cast<long long>(shape.vocab_size),
      kDropout, what.c_str(), warmup, steps);
}

double tokens_per_s(int64_t seq, const StepResult& r) {
  return static_cast<double>(seq) / (r.step_ms / 1e3);
}

std::vector<std::string> run_overrides(const WorkDir& work, const ModelShape& shape) {
  return {
      "data.path=" + work / "data",
      "data.split=[1]",
      "output.dir=" + work / "run",
      "output.export=false",
      "train.eval_interval=0",
      set("model.num_layers", shape.num_layers),
      set("model.hidden_size", shape.hidden_size),
      set("model.num_attention_heads", shape.num_attention_heads),
      set("model.seq_length", shape.seq_length),
      set("model.vocab_size", shape.vocab_size),
      set("model.hidden_dropout", kDropout),
      set("model.attention_dropout", kDropout),
  };
}

StepResult run_on_host(const std::vector<std::string>& overrides, int warmup, int steps) {
  const trainer::Config config = trainer::parse_config("", "bench", overrides);
  runtime::CpuAllocator allocator;
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
  std::ostringstream log;  // the run's description: not part of a benchmark's output
  trainer::Trainer trainer(trainer::plan_run(config, groups, allocator), groups, allocator, log);
  StepResult result;
  result.parameters = model::GptParams::count(config.model);
  result.model_flops = trainer.stage_setup().model_flops_per_step;
  result.predicted_peak = trainer.predicted_activation_peak();
  result.predicted_step_ms = trainer.predicted_step_ms();
  double timed_s = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    const trainer::StepMetrics metrics = trainer.train_step();
    if (step >= warmup) timed_s += metrics.step_ms / 1e3;
    result.recompute_flops = metrics.recompute_flops;
    result.activation_peak = metrics.memory[runtime::MemoryCategory::activation].peak;
  }
  result.step_ms = timed_s / steps * 1e3;
  result.model_gflops = static_cast<double>(result.model_flops) / (timed_s / steps) / 1e9;
  return result;
}

}  // namespace bench
