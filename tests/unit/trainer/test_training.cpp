// The training loop end to end in one process: it learns a synthetic chain to
// near its entropy floor, the metrics file says what happened, steps reuse
// memory, and train.steps 0 exports the initial model.
#include <cmath>
#include <cstring>
#include <fstream>

#include "trainer/export/hf_gpt2.h"
#include "trainer/export/safetensors.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::InProcessRun;
using testing_support::TempDir;

TEST(Training, LearnsTheSyntheticChainToNearItsFloor) {
  TempDir dir;
  SyntheticCorpusSpec spec;
  spec.alphabet = 8;
  spec.branching = 2;
  spec.num_tokens = 400'000;
  const SyntheticEntropy entropy = testing_support::write_corpus(dir / "chain", spec);
  const Config config = testing_support::small_config(
      dir / "chain", dir / "run",
      {"model.seq_length=32", "model.hidden_size=64", "model.num_attention_heads=4",
       "model.hidden_dropout=0", "model.attention_dropout=0", "train.steps=300",
       "train.micro_batch_size=16", "train.global_batch_size=16", "train.eval_interval=300",
       "train.eval_iters=8", "optimizer.lr=3e-3", "optimizer.min_lr=3e-4",
       "optimizer.lr_warmup_steps=20", "optimizer.adam_beta2=0.95", "output.export=false"});
  InProcessRun run(config);
  const TrainSummary summary = run.trainer->run();
  const double floor = entropy.loss_floor(32);
  ASSERT_TRUE(summary.last_val_loss.has_value());
  EXPECT_LT(*summary.last_val_loss, floor + 0.15)
      << "floor " << floor << ", first loss " << summary.first_loss;
  EXPECT_GT(summary.first_loss, floor + 3.0);       // it did learn: a fresh model is near ln 256
  EXPECT_GT(*summary.last_val_loss, floor - 0.02);  // nothing beats the floor
}

TEST(Training, MetricsFileHasOneObjectPerStepFromStepOne) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", {"train.eval_interval=2", "train.steps=3"}));
  run.trainer->run();
  const auto lines = testing_support::read_lines(dir / "run/metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].rfind("{\"step\": " + std::to_string(i + 1) + ", \"loss\": ", 0), 0u)
        << lines[i];
    for (const char* key :
         {"\"lr\"", "\"grad_norm\"", "\"tokens_per_s\"", "\"peak_activation_bytes\"",
          "\"peak_param_bytes\"", "\"recompute_flops\""})
      EXPECT_NE(lines[i].find(key), std::string::npos) << key << " missing in " << lines[i];
  }
  EXPECT_EQ(lines[0].find("val_loss"), std::string::npos);
  EXPECT_NE(lines[1].find("\"val_loss\""), std::string::npos);  // step 2: eval_interval
  EXPECT_NE(lines[2].find("\"val_loss\""), std::string::npos);  // the last step
  EXPECT_NE(run.log.str().find("done: 3 steps"), std::string::npos) << run.log.str();
}

TEST(Training, StepsAfterTheFirstAllocateNothingFromTheSystem) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", {"model.hidden_dropout=0.1"}));
  run.trainer->train_step();
  const int64_t after_first = run.allocator.stats().system_allocations;
  for (int i = 0; i < 3; ++i) run.trainer->train_step();
  EXPECT_EQ(run.allocator.stats().system_allocations, after_first);
  EXPECT_EQ(run.allocator.stats()[runtime::MemoryCategory::activation].current, 0);
}

TEST(Training, MeasuredActivationPeakEqualsPrediction) {
  CorpusDir dir;
  for (const char* plan : {"recompute.granularity=none", "recompute.granularity=selective"}) {
    InProcessRun run(dir.config("run", {"model.hidden_dropout=0.1", plan}));
    const StepMetrics m = run.trainer->train_step();
    EXPECT_EQ(m.memory[runtime::MemoryCategory::activation].peak, m.predicted_activation_peak)
        << plan;
    EXPECT_EQ(m.comm_bytes, m.predicted_comm_bytes) << plan;
  }
}

TEST(Training, ZeroStepsWritesTheInitialModel) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", {"train.steps=0"}));
  run.trainer->run();
  const SafetensorsFile file = read_safetensors(dir / "run/model.safetensors");
  const auto& wpe = file.tensors.at("transformer.wpe.weight");
  EXPECT_EQ(wpe.shape, (std::vector<int64_t>{16, 32}));
  const float* init = run.trainer->params().wpe.f32();
  EXPECT_EQ(std::memcmp(wpe.data.data(), init, wpe.data.size()), 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "run/config.json"));
  EXPECT_TRUE(testing_support::read_lines(dir / "run/metrics.jsonl").empty());
}

TEST(Training, ExportReimportGivesTheSameLoss) {
  CorpusDir dir;
  const Config config = dir.config("run", {"train.steps=2", "train.eval_interval=2"});
  InProcessRun run(config);
  run.trainer->run();
  const double trained_loss = run.trainer->evaluate();
  // A fresh trainer (different init seed) loads the export and evaluates.
  Config other = config;
  other.train.seed = 99;
  other.output.dir = dir / "run2";
  InProcessRun fresh(other);
  EXPECT_NE(fresh.trainer->evaluate(), trained_loss);
  from_hf_gpt2(read_safetensors(dir / "run/model.safetensors"), fresh.trainer->params(),
               config.model);
  EXPECT_EQ(fresh.trainer->evaluate(), trained_loss);
}

TEST(Training, CommBackendIsNcclOnlyWithAGpuPerRank) {
  Config config;
  using parallel::CommBackend;
  EXPECT_EQ(resolve_comm_backend(config, 4, 4), CommBackend::mpi);  // cpu
  config.train.device = Device::cuda;
  EXPECT_EQ(resolve_comm_backend(config, 1, 1), CommBackend::mpi);  // nothing to communicate
  EXPECT_EQ(resolve_comm_backend(config, 4, 4), CommBackend::nccl);
  EXPECT_EQ(resolve_comm_backend(config, 4, 1), CommBackend::mpi);  // ranks share a GPU
  config.parallel.backend = CommBackend::mpi;
  EXPECT_EQ(resolve_comm_backend(config, 4, 4), CommBackend::mpi);
  config.parallel.backend = CommBackend::nccl;
  EXPECT_EQ(resolve_comm_backend(config, 4, 4), CommBackend::nccl);
  testing_support::expect_error<runtime::ConfigError>(
      [&] { resolve_comm_backend(config, 4, 2); }, {"parallel.backend", "the 4 ranks share 2 GPUs"},
      "nccl with shared GPUs was accepted");
}

TEST(Training, DefaultConfigParsesAndFitsItsData) {
  const Config config = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/tiny.yaml");
  EXPECT_EQ(config.data.path, "data/synthetic");
  EXPECT_NO_THROW(check_supported(config));
}

}  // namespace
}  // namespace trainer
