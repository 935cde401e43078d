// train.sample_interval under parallel layouts: tensor 2 x pipeline 2 (4 ranks) or data 2 (2
// ranks) gathers the whole model to world rank 0 for each sample, and the tokens it records are
// those `trainer generate --checkpoint` gives from the checkpoint of the same step, loaded
// (resharded) into one process.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "trainer/generate/generate_command.h"
#include "trainer/generate/model_source.h"

namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

// The "tokens" list of the last sample event of a ledger.
std::vector<int32_t> last_sample_tokens(const std::string& ledger) {
  std::ifstream in(ledger);
  std::string sample;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"event\": \"sample\"") != std::string::npos) sample = line;
  std::vector<int32_t> tokens;
  const size_t open = sample.find("\"tokens\": [");
  if (open == std::string::npos) return tokens;
  std::string list = sample.substr(open + 11, sample.find(']', open) - open - 11);
  for (size_t at = 0; at < list.size();) {
    tokens.push_back(std::stoi(list.substr(at)));
    at = list.find(',', at);
    if (at == std::string::npos) break;
    ++at;
  }
  return tokens;
}

TEST(Layouts, SamplesGatherTheWholeModelAndMatchGenerateFromTheCheckpoint) {
  if (world_size() != 2 && world_size() != 4) GTEST_SKIP() << "data 2 or tensor 2 x pipeline 2";
  mpi_test::SharedData shared;
  std::vector<std::string> layout = {"checkpoint.dir=" + shared.out("ckpt"), "train.steps=2",
                                     "train.sample_interval=2", "train.sample_tokens=6"};
  if (world_size() == 2) layout.push_back("parallel.data=2");
  if (world_size() == 4) layout.insert(layout.end(), {"parallel.tensor=2", "parallel.pipeline=2"});
  {
    mpi_test::Run run(mpi_test::config_for(shared, layout), true);
    run.trainer->run();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  bool same = true;
  if (world_rank() == 0) {
    const std::vector<int32_t> recorded = last_sample_tokens(shared.out("run/events.jsonl"));
    EXPECT_EQ(recorded.size(), 6u);
    const auto loaded = trainer::load_checkpoint_model(shared.out("ckpt/step_00000002"));
    trainer::SamplingOptions sampling;
    sampling.max_new_tokens = 6;
    sampling.seed = loaded->config.train.seed;
    const trainer::Sample sample =
        trainer::generate_sample(loaded->params, loaded->config.model, {0}, sampling, nullptr);
    EXPECT_EQ(sample.generated, recorded) << "world size " << world_size();
    same = sample.generated == recorded;
  }
  EXPECT_TRUE(all_ranks(same));
}

}  // namespace
