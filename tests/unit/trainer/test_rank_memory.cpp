// The whole-rank memory model against the allocator: for every recompute preset, both attention
// backends, dropout on and off, the host (fp32) and the emulated device (bf16), the measured
// peak of every memory category over a training step equals the meta-device replay's.
#include <gtest/gtest.h>

#include "recompute/memory_model.h"
#include "tests/support/emulated_device.h"
#include "tests/unit/trainer/trainer_test_util.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/rank_memory.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;

const std::vector<std::vector<std::string>>& presets() {
  static const std::vector<std::vector<std::string>> all = {
      {"recompute.granularity=none"},
      {"recompute.granularity=selective"},
      {"recompute.granularity=selective", "recompute.modules=[core_attn, act, layernorm, mlp]"},
      {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=2"},
      {"recompute.granularity=full", "recompute.method=block", "recompute.num_layers=1"},
  };
  return all;
}

// Every category's measured peak in the second step (after the optimizer's first update)
// against the prediction.
template <class Run>
void expect_categories_equal(const Config& config, const std::string& what) {
  Run run(config);
  run.trainer->train_step();
  const StepMetrics m = run.trainer->train_step();
  const RankMemory predicted = predict_rank_memory(config, 0);
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    EXPECT_EQ(m.memory[c].peak, predicted[c]) << what << ": category " << runtime::category_name(c);
  }
  EXPECT_EQ(predicted[runtime::MemoryCategory::activation], m.predicted_activation_peak) << what;
}

struct DeviceRun : private emulated::Device,
                   testing_support::InProcessRunOn<emulated::DeviceAllocator> {
  explicit DeviceRun(const Config& config) : InProcessRunOn(config) {}
};

TEST(RankMemory, EveryCategoryEqualsTheReplayOnTheHost) {
  const CorpusDir dir;
  for (const char* attention : {"unfused", "flash"}) {
    for (const char* dropout : {"0.0", "0.1"}) {
      for (const auto& preset : presets()) {
        std::vector<std::string> overrides = preset;
        overrides.push_back(std::string("model.attention_backend=") + attention);
        overrides.push_back(std::string("model.hidden_dropout=") + dropout);
        overrides.push_back(std::string("model.attention_dropout=") + dropout);
        overrides.push_back("model.num_layers=3");
        expect_categories_equal<testing_support::InProcessRun>(
            dir.config("run", overrides),
            std::string(attention) + ", dropout " + dropout + ", " + preset.back());
      }
    }
  }
}

TEST(RankMemory, EveryCategoryEqualsTheReplayOnTheEmulatedDeviceInBf16) {
  const CorpusDir dir;
  for (const char* attention : {"unfused", "flash"}) {
    for (const auto& preset : presets()) {
      std::vector<std::string> overrides = preset;
      overrides.push_back(std::string("model.attention_backend=") + attention);
      overrides.insert(overrides.end(),
                       {"train.device=cuda", "train.precision=bf16", "model.hidden_dropout=0.1"});
      expect_categories_equal<DeviceRun>(dir.config("run", overrides),
                                         std::string(attention) + ", " + preset.back());
    }
  }
}

// The Llama block (RMSNorm keeps no mean, SwiGLU's fc1 is twice as wide, GQA's k and v are a
// group's, an untied head): every category as the replay predicts, host f32 with dropout and
// the emulated device in bf16.
TEST(RankMemory, LlamaEveryCategoryEqualsTheReplay) {
  const CorpusDir dir;
  const std::vector<std::string> llama = {"model.architecture=llama", "model.num_attention_heads=4",
                                          "model.num_query_groups=2", "model.ffn_hidden_size=64",
                                          "model.num_layers=3"};
  for (const char* attention : {"unfused", "flash"}) {
    for (const auto& preset : presets()) {
      std::vector<std::string> overrides = llama;
      overrides.insert(overrides.end(), preset.begin(), preset.end());
      overrides.push_back(std::string("model.attention_backend=") + attention);
      std::vector<std::string> host = overrides, device = overrides;
      host.insert(host.end(), {"model.hidden_dropout=0.1", "model.attention_dropout=0.1"});
      device.insert(device.end(), {"train.device=cuda", "train.precision=bf16"});
      expect_categories_equal<testing_support::InProcessRun>(
          dir.config("run", host), std::string("llama host ") + attention + ", " + preset.back());
      expect_categories_equal<DeviceRun>(
          dir.config("run", device), std::string("llama bf16 ") + attention + ", " + preset.back());
    }
  }
}

// The replay needs no dataset, no device and no peers: a 175B-shaped rank of an 8x8x16 job.
TEST(RankMemory, PlansAnyShapeWithoutDataOrDevice) {
  Config config = parse_config(
      "", "test",
      {"model.num_layers=96", "model.hidden_size=12288", "model.num_attention_heads=96",
       "model.seq_length=2048", "model.vocab_size=50257", "parallel.tensor=8",
       "parallel.pipeline=16", "parallel.data=8", "parallel.sequence_parallel=true",
       "train.device=cuda", "train.micro_batch_size=1", "train.global_batch_size=1024",
       "recompute.granularity=selective"},
      ConfigUse::plan);
  const RankMemory memory = predict_rank_memory(config, 0);
  // bf16 weights of 6 layers (1/16 of 96) and the embedding, over 8 tensor-parallel ranks.
  const int64_t layer_params = 12 * int64_t{12288} * 12288 / 8;
  EXPECT_GT(memory[runtime::MemoryCategory::param], 6 * layer_params * 2);
  EXPECT_LT(memory[runtime::MemoryCategory::param], 7 * layer_params * 2 + (int64_t{1} << 30));
  EXPECT_EQ(memory[runtime::MemoryCategory::optimizer],
            3 * memory[runtime::MemoryCategory::grad]);  // fp32 master + two moments
  const StageSetup setup = make_stage_setup(config, 0, 0);
  EXPECT_EQ(memory[runtime::MemoryCategory::activation], setup.predicted_activation_peak);
  EXPECT_GT(memory.device_overhead, 0);
}

}  // namespace
}  // namespace trainer
