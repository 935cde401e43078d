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

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr
};

Result run(const std::string& args) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string command = std::string(TRAINER_BINARY) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  Result r{-1, ""};
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
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
