// The export of a run on several ranks: rank 0 gathers one parameter at a time as the writer
// reaches it, writes the bytes the whole gathered model exports to, and after a failure of its
// own still takes what the other ranks send, so that no rank waits forever.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "mpi_test_util.h"
#include "runtime/error.h"
#include "trainer/export/hf_export.h"
#include "trainer/run/gathered_export.h"

namespace {

using mpi_test::world_rank;
using mpi_test::world_size;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// tp2 x pp2, a Llama block with q/k/v biases after two steps.
trainer::Config tp2pp2_config(const mpi_test::SharedData& shared) {
  return mpi_test::config_for(
      shared,
      {"model.architecture=llama", "model.num_query_groups=2", "model.add_qkv_bias=true",
       "model.ffn_hidden_size=48", "train.steps=2", "parallel.tensor=2", "parallel.pipeline=2"});
}

// The whole model's config as the run pads its vocabulary.
model::GptConfig whole_model(const trainer::Config& config) {
  model::GptConfig whole = config.model;
  whole.make_vocab_size_divisible_by *= config.parallel.tensor;
  return whole;
}

// The gathered export is byte for byte the export of the whole gathered model, in bf16 and f32;
// rank 0 held at most the fused QKV weight and bias and the attention output projection (the
// tensors k_proj.bias .. v_proj.weight are written between their first and last reads), or the
// largest parameter, never the model.
TEST(GatheredExport, IsTheWholeGatheredModelsExportHoldingAFewParameters) {
  if (world_size() != 4) GTEST_SKIP() << "a tp2 x pp2 layout on 4 ranks";
  mpi_test::SharedData shared;
  const trainer::Config config = tp2pp2_config(shared);
  mpi_test::Run run(config, true);
  for (int step = 0; step < 2; ++step) run.trainer->train_step();
  const model::GptConfig whole = whole_model(config);
  const model::GptParams& local = run.trainer->host_params();
  for (const runtime::DType dtype : {runtime::DType::bf16, runtime::DType::f32}) {
    const std::string gathered = shared.out("gathered"), held = shared.out("held");
    const int64_t peak = trainer::export_hf_gathered(gathered, run.groups, local, whole, dtype);
    const auto full = run.trainer->gather(local);
    if (world_rank() != 0) {
      EXPECT_EQ(peak, 0);
      continue;
    }
    trainer::export_hf(held, *full, whole, dtype);
    for (const char* file : {"/model.safetensors", "/config.json"}) {
      const std::string bytes = file_bytes(gathered + file);
      EXPECT_FALSE(bytes.empty()) << file;
      EXPECT_TRUE(bytes == file_bytes(held + file)) << file << " differs";
    }
    int64_t largest = 0;
    for (const model::NamedParam& p : full->named) largest = std::max(largest, p.tensor.numel());
    const model::LayerParams& layer = full->layers[0];
    const int64_t attention =
        layer.qkv_weight.numel() + layer.qkv_bias.numel() + layer.proj_weight.numel();
    EXPECT_GT(peak, 0);
    EXPECT_LE(peak, std::max(largest, attention));
    EXPECT_LT(peak, full->flat.numel() / 4);
  }
}

// An export directory rank 0 cannot create: rank 0 throws InputError naming it after taking every
// part, the other ranks return, and the world's next collective (a whole-model gather) works.
TEST(GatheredExport, AFailureOnRankZeroTakesEveryPartThenThrows) {
  if (world_size() != 4) GTEST_SKIP() << "a tp2 x pp2 layout on 4 ranks";
  mpi_test::SharedData shared;
  const trainer::Config config = tp2pp2_config(shared);
  mpi_test::Run run(config, true);
  if (world_rank() == 0) std::ofstream(shared.out("a_file")) << "not a directory";
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string dir = shared.out("a_file") + "/export";
  const model::GptParams& local = run.trainer->host_params();
  if (world_rank() == 0) {
    try {
      trainer::export_hf_gathered(dir, run.groups, local, whole_model(config),
                                  runtime::DType::bf16);
      ADD_FAILURE() << "no error";
    } catch (const runtime::InputError& error) {
      EXPECT_NE(std::string(error.what()).find(dir), std::string::npos) << error.what();
    }
  } else {
    EXPECT_EQ(trainer::export_hf_gathered(dir, run.groups, local, whole_model(config),
                                          runtime::DType::bf16),
              0);
  }
  const auto full = run.trainer->gather(local);
  EXPECT_EQ(full != nullptr, world_rank() == 0);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
