// Operating a run across ranks: a memory target that only some ranks miss stops every rank at
// the same step (one agreed collective), with a checkpoint and one target_miss ledger line; a
// guard rewind under pipeline and data parallelism ends where one process that skipped the
// same batches ends.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "mpi_test_util.h"

namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

double sum_of_peaks_gib(const trainer::StepMetrics& m) {
  int64_t bytes = 0;
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories) bytes += m.memory[c].peak;
  return static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
}

TEST(Targets, RanksAgreeOnAMissOnlySomeRanksSee) {
  mpi_test::SharedData shared;
  // Two pipeline stages hold different memory (the first has the embedding, the last the head).
  const std::vector<std::string> layout = {"parallel.pipeline=2",
                                           "parallel.data=" + std::to_string(world_size() / 2)};
  auto config = [&](const std::string& run, std::vector<std::string> more) {
    more.insert(more.begin(), layout.begin(), layout.end());
    more.push_back("output.dir=" + shared.out(run));
    return mpi_test::config_for(shared, more);
  };
  mpi_test::Run probe(config("probe", {}), true);
  const double mine = sum_of_peaks_gib(probe.trainer->train_step());
  std::vector<double> all(static_cast<size_t>(world_size()));
  MPI_Allgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  const double low = *std::min_element(all.begin(), all.end());
  const double high = *std::max_element(all.begin(), all.end());
  ASSERT_TRUE(all_ranks(low < high)) << "every rank holds " << low << " GiB";
  const double limit = (low + high) / 2;
  char limit_text[40];
  std::snprintf(limit_text, sizeof limit_text, "%.17g", limit);

  mpi_test::Run gated(config("gated", {"targets.max_memory_gib=" + std::string(limit_text),
                                       "targets.action=checkpoint_and_stop",
                                       "checkpoint.dir=" + shared.out("ckpt")}),
                      true);
  const trainer::TrainSummary summary = gated.trainer->run();
  // Some rank saw no miss of its own, yet every rank stopped after step 1.
  EXPECT_FALSE(all_ranks(mine > limit));
  EXPECT_TRUE(all_ranks(summary.stop == trainer::StopReason::target_missed));
  EXPECT_TRUE(all_ranks(gated.trainer->step() == 1));
  bool ledger_ok = true;
  if (world_rank() == 0) {
    std::ifstream latest(shared.out("ckpt") + "/latest");
    std::string step_dir;
    latest >> step_dir;
    EXPECT_EQ(step_dir, "step_00000001");
    int misses = 0;
    std::ifstream events(shared.out("gated") + "/events.jsonl");
    for (std::string line; std::getline(events, line);) {
      if (line.find("\"event\": \"target_miss\"") == std::string::npos) continue;
      ++misses;
      char measured[64];
      std::snprintf(measured, sizeof measured, "\"measured\": %.9g,", high);
      EXPECT_NE(line.find(measured), std::string::npos) << line;
      EXPECT_NE(line.find("\"step\": 1, \"rank\": \"all\""), std::string::npos) << line;
    }
    ledger_ok = misses == 1;
    EXPECT_EQ(misses, 1);
  }
  EXPECT_TRUE(all_ranks(ledger_ok));
}

TEST(Guard, RewindAcrossRanksMatchesOneProcessThatSkipsTheWindow) {
  mpi_test::SharedData shared;
  const std::vector<std::string> common = {"train.steps=6", "output.dir=" + shared.out("rewound")};
  std::vector<std::string> guarded = {"parallel.pipeline=2",
                                      "parallel.data=" + std::to_string(world_size() / 2),
                                      "checkpoint.dir=" + shared.out("ckpt"),
                                      "checkpoint.interval=2",
                                      "train.guard.action=rewind",
                                      "train.guard.window=2",
                                      "train.inject.step=5",
                                      "train.inject.scale_loss=100"};
  guarded.insert(guarded.end(), common.begin(), common.end());
  mpi_test::Run rewound(mpi_test::config_for(shared, guarded), true);
  const trainer::TrainSummary summary = rewound.trainer->run();
  // Step 5 spiked, the last checkpoint was step 4: batch 4 is skipped.
  EXPECT_TRUE(all_ranks(rewound.trainer->rewinds() == 1));
  EXPECT_TRUE(all_ranks(rewound.trainer->skipped_batches().to_text() == "4-4"));
  bool close = true;
  if (world_rank() == 0) {
    mpi_test::Run reference(
        mpi_test::config_for(shared, {"train.steps=6", "output.dir=" + shared.out("reference"),
                                      "data.skip_batches=[[4, 4]]"}),
        false);
    const double expected = reference.trainer->run().last_loss;
    close = std::abs(summary.last_loss - expected) <= 1e-5 * std::abs(expected);
    EXPECT_TRUE(close) << summary.last_loss << " vs one process " << expected;
  }
  EXPECT_TRUE(all_ranks(close));
}

}  // namespace
