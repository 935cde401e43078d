// The `trainer` command line as a user meets it: help, version, and clear
// errors with a non-zero exit for bad commands, arguments and configs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "trainer_test_util.h"

namespace {

using Result = trainer::testing_support::CommandResult;

// `trainer ARGS`.
Result run(const std::string& args) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return trainer::testing_support::run_command(std::string(TRAINER_BINARY) + " " + args);
}

TEST(Cli, HelpAndVersion) {
  const Result help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"train --config", "plan --config", "prepare-data"})
    EXPECT_NE(help.output.find(command), std::string::npos) << command;
  const Result version = run("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.output.rfind("trainer ", 0), 0u);
  EXPECT_EQ(run("").exit_code, 2);
}

TEST(Cli, UnknownCommandAndArguments) {
  const Result unknown = run("fly");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.output.find("unknown command 'fly'"), std::string::npos) << unknown.output;
  const Result no_config = run("train");
  EXPECT_EQ(no_config.exit_code, 1);
  EXPECT_NE(no_config.output.find("train: --config FILE is required"), std::string::npos)
      << no_config.output;
  const Result bad_flag = run("plan --config x.yaml --sett a=b");
  EXPECT_NE(bad_flag.output.find("plan: unknown argument '--sett'"), std::string::npos)
      << bad_flag.output;
}

TEST(Cli, BadConfigNamesTheFieldAndRank) {
  trainer::testing_support::TempDir dir;
  std::ofstream(dir / "bad.yaml") << "model:\n  hidden_size: 100\n  num_attention_heads: 3\n"
                                     "data: {path: x}\n";
  const Result r = run("train --config " + (dir / "bad.yaml"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("[rank 0] error: model.hidden_size: 100 is not divisible by "
                          "model.num_attention_heads 3"),
            std::string::npos)
      << r.output;
  const Result missing = run("train --config " + (dir / "missing.yaml"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("missing.yaml"), std::string::npos) << missing.output;
}

TEST(Cli, MissingDatasetIsAClearError) {
  trainer::testing_support::TempDir dir;
  std::ofstream(dir / "run.yaml") << "data: {path: " << (dir / "nothing") << "}\n"
                                  << "output: {dir: " << (dir / "out") << "}\n";
  const Result r = run("train --config " + (dir / "run.yaml"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nothing.idx"), std::string::npos) << r.output;
}

TEST(Cli, PlanPrintsEveryLayerAndThePrediction) {
  const Result r = run("plan --config " + std::string(TRAINER_SOURCE_DIR) +
                       "/configs/tiny.yaml --set recompute.granularity=full "
                       "--set recompute.method=block --set recompute.num_layers=2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("      1 | full"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("      2 | none"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("predicted activation peak"), std::string::npos);
}

TEST(Cli, ATargetGateStopExitsWithItsCode) {
  trainer::testing_support::CorpusDir dir;
  const trainer::Config config =
      dir.config("run", {"targets.max_loss.at_step=1", "targets.max_loss.value=0.1",
                         "targets.window=1", "targets.action=checkpoint_and_stop",
                         "checkpoint.dir=" + dir / "ckpt", "output.export=false"});
  std::ofstream(dir / "run.yaml") << trainer::to_yaml(config);
  const Result result = run("train --config " + dir / "run.yaml");
  EXPECT_EQ(result.exit_code, trainer::kExitTargetMissed) << result.output;
  EXPECT_NE(result.output.find("stopped by targets.max_loss 0.1"), std::string::npos)
      << result.output;
}

}  // namespace

namespace {

// A config with no dataset: planning needs shapes only.
std::string write_shapes_only_config(const trainer::testing_support::TempDir& dir) {
  const std::string path = dir / "shapes.yaml";
  std::ofstream(path) << "model: {num_layers: 8, hidden_size: 64, num_attention_heads: 4,\n"
                         "        seq_length: 64, vocab_size: 256}\n"
                         "train: {micro_batch_size: 2, global_batch_size: 16}\n"
                         "parallel: {pipeline: 4}\n";
  return path;
}

// The peak line of `trainer plan`: "largest total X against ...".
std::string largest_total(const std::string& output) {
  const size_t at = output.find("largest total ");
  return at == std::string::npos ? "" : output.substr(at, output.find(" against", at) - at);
}

}  // namespace

TEST(Cli, PlanUnderABudgetEmitsAPlanThatPlansTheSame) {
  const trainer::testing_support::TempDir dir;
  const std::string config = write_shapes_only_config(dir);
  const Result planned = run("plan --config " + config + " --budget-gib 0.004");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_NE(planned.output.find("fits"), std::string::npos) << planned.output;
  EXPECT_NE(planned.output.find("planned automatically"), std::string::npos);
  const Result yaml = run("plan --config " + config + " --budget-gib 0.004 --emit-yaml");
  ASSERT_EQ(yaml.exit_code, 0) << yaml.output;
  ASSERT_EQ(yaml.output.rfind("recompute:\n  granularity: none\n  layers:\n", 0), 0u)
      << yaml.output;
  // Pasted into the config, the emitted section is an ordinary plan with the same memory.
  std::ofstream(config, std::ios::app) << yaml.output;
  const Result pasted = run("plan --config " + config + " --set train.memory_budget_gib=0.004");
  ASSERT_EQ(pasted.exit_code, 0) << pasted.output;
  EXPECT_EQ(largest_total(pasted.output), largest_total(planned.output)) << pasted.output;
  EXPECT_FALSE(largest_total(pasted.output).empty());
}

TEST(Cli, PlanSaysByHowMuchNothingFits) {
  const trainer::testing_support::TempDir dir;
  const Result r = run("plan --config " + write_shapes_only_config(dir) + " --budget-gib 0.0001");
  EXPECT_EQ(r.exit_code, 1);
  for (const char* piece : {"train.memory_budget_gib: 0.0001 GiB does not fit pipeline stage 0",
                            "least-memory plan predicts", "over; the largest consumer is"})
    EXPECT_NE(r.output.find(piece), std::string::npos) << piece << " not in: " << r.output;
  const Result bad = run("plan --config " + write_shapes_only_config(dir) + " --budget-gib -1");
  EXPECT_NE(bad.output.find("--budget-gib needs a number of GiB > 0, got '-1'"), std::string::npos)
      << bad.output;
}

// Output prefixes in folders that do not exist yet: the folders are made; a folder that cannot
// be made (a file is in the way) is named.
TEST(Cli, PlanOutputsMakeTheirFolders) {
  const trainer::testing_support::TempDir dir;
  const std::string config = write_shapes_only_config(dir);
  const Result r = run("plan --config " + config + " --timeline " + (dir / "new/deeper/timeline"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::ifstream(dir / "new/deeper/timeline_rank0.json").good()) << r.output;
  EXPECT_TRUE(std::ifstream(dir / "new/deeper/timeline_rank0.trace.json").good());
  std::ofstream(dir / "file") << "x";
  const Result blocked = run("plan --config " + config + " --timeline " + (dir / "file/timeline"));
  EXPECT_EQ(blocked.exit_code, 1);
  EXPECT_NE(blocked.output.find("cannot make the folder " + (dir / "file")), std::string::npos)
      << blocked.output;
}

TEST(Cli, PlanSweepWritesTheTableCsvAndJson) {
  const trainer::testing_support::TempDir dir;
  const std::string prefix = dir / "sweep";
  const Result r = run("plan --config " + write_shapes_only_config(dir) +
                       " --budget-gib 0.01 --sweep model.seq_length=32,64,512 --out " + prefix);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no fit"), std::string::npos) << r.output;  // 512 fits nothing
  const std::vector<std::string> csv = trainer::testing_support::read_lines(prefix + ".csv");
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[0].rfind("value,none_peak_bytes,selective_peak_bytes,full_peak_bytes,", 0), 0u);
  EXPECT_EQ(csv[3].rfind("512,", 0), 0u);
  // The JSON: one row per value, the planner's column empty where nothing fits, a frontier.
  const std::string check = "python3 -c \"import json; d = json.load(open('" + prefix +
                            ".json')); rows = d['rows']; "
                            "assert [r['value'] for r in rows] == ['32', '64', '512']; "
                            "assert rows[2]['peak_bytes']['planned'] is None; "
                            "assert rows[0]['fits']['planned']; "
                            "assert len(d['frontier'][0]['points']) > 0\"";
  EXPECT_EQ(std::system(check.c_str()), 0) << "sweep.json";
}
