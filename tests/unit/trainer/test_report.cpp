// `trainer report`: a short real run of configs/tiny.yaml, then report.md checked against its
// metrics.jsonl and the PNG files checked as PNG; targets and events from a written run folder;
// clear errors naming the file and line for missing or corrupt input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/error.h"
#include "trainer/commands/report.h"
#include "trainer/util/format_bytes.h"
#include "trainer_test_util.h"

namespace {

using trainer::testing_support::expect_error;
using trainer::testing_support::read_lines;
using trainer::testing_support::TempDir;

using Command = trainer::testing_support::CommandResult;
using trainer::testing_support::run_command;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

// Whether the report's own interpreter search finds matplotlib here.
bool matplotlib_available() {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (run_command(std::string(python) + " -c 'import matplotlib'").exit_code == 0) return true;
  return false;
}

// A PNG's width and height when `bytes` is a whole PNG file (signature, IHDR first, IEND last),
// else {0, 0}.
std::array<uint32_t, 2> png_size(const std::string& bytes) {
  const std::string signature = "\x89PNG\r\n\x1a\n";
  const std::string iend = std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  if (bytes.size() < 57 || bytes.compare(0, 8, signature) != 0 || bytes.compare(12, 4, "IHDR") ||
      bytes.compare(bytes.size() - 12, 12, iend) != 0)
    return {0, 0};
  auto big_endian = [&](size_t at) {
    uint32_t value = 0;
    for (size_t i = 0; i < 4; ++i) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
    return value;
  };
  return {big_endian(16), big_endian(20)};
}

// One short training run of configs/tiny.yaml (6 steps, validation every 3, the memory timeline
// of step 2), shared by the tests.
class ReportOfRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const std::string trainer = TRAINER_BINARY;
    const Command data = run_command(trainer + " prepare-data --synthetic --num-tokens 100000" +
                                     " --output-prefix " + (*dir_ / "data"));
    ASSERT_EQ(data.exit_code, 0) << data.output;
    const Command train =
        run_command(trainer + " train --config " + TRAINER_SOURCE_DIR + "/configs/tiny.yaml" +
                    " --set data.path=" + (*dir_ / "data") + " --set output.dir=" + run_dir() +
                    " --set train.steps=6 --set train.eval_interval=3 --set train.log_interval=1" +
                    " --set optimizer.lr_warmup_steps=2 --set output.export=false" +
                    " --set train.memory_timeline_step=2");
    ASSERT_EQ(train.exit_code, 0) << train.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string run_dir() { return *dir_ / "run"; }

  static inline TempDir* dir_ = nullptr;
};

TEST_F(ReportOfRun, SummaryMatchesMetricsAndPlotsArePngs) {
  const Command report = run_command(std::string(TRAINER_BINARY) + " report " + run_dir());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string md = read_file(run_dir() + "/report.md");
  // The last loss and the last validation loss are the ones of metrics.jsonl's step 6.
  const std::vector<std::string> lines = read_lines(run_dir() + "/metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  const trainer::RunRecord run = trainer::read_run(run_dir());
  char expected[128];
  std::snprintf(expected, sizeof expected, "| loss | %.4f (step 6) |", run.metrics[5].at("loss"));
  EXPECT_TRUE(contains(md, expected)) << expected << "\n" << md;
  std::snprintf(expected, sizeof expected, "| validation loss | %.4f (step 6) |",
                run.metrics[5].at("val_loss"));
  EXPECT_TRUE(contains(md, expected)) << expected << "\n" << md;
  EXPECT_TRUE(contains(md, "median over steps 2–6")) << md;
  // The step-time model's prediction is in every line, the same each step, and in the report.
  const double predicted = run.metrics[0].at("predicted_step_ms");
  EXPECT_GT(predicted, 0);
  for (const auto& line : run.metrics) EXPECT_EQ(line.at("predicted_step_ms"), predicted);
  std::snprintf(expected, sizeof expected, "| predicted step time (error) | %.1f ms (", predicted);
  EXPECT_TRUE(contains(md, expected)) << expected << "\n" << md;
  // The activation peak is measured == predicted on one CPU rank.
  const std::string activation = trainer::format_bytes(
      static_cast<int64_t>(run.metrics[0].at("predicted_activation_peak_bytes")));
  EXPECT_TRUE(contains(md, "| activation | " + activation + " | " + activation + " | 0 |")) << md;
  if (!matplotlib_available()) {
    EXPECT_TRUE(contains(md, "No plots: no python3 with matplotlib")) << md;
    GTEST_SKIP() << "no python3 with matplotlib: report.md without pictures checked only";
  }
  EXPECT_TRUE(contains(md, "The memory timeline of the step")) << md;
  for (const char* name : {"loss", "throughput", "memory", "recompute", "timeline"}) {
    const std::string file = std::string("plots/") + name + ".png";
    EXPECT_TRUE(contains(md, "![" + std::string(name) + "](" + file + ")")) << file << "\n" << md;
    const std::array<uint32_t, 2> size = png_size(read_file(run_dir() + "/" + file));
    EXPECT_GT(size[0], 400u) << file;
    EXPECT_GT(size[1], 300u) << file;
  }
}

TEST_F(ReportOfRun, WithoutMatplotlibTheReportSaysSo) {
  const Command report = run_command(std::string(TRAINER_BINARY) + " report " + run_dir() +
                                     " --python /nonexistent/python3");
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string md = read_file(run_dir() + "/report.md");
  EXPECT_TRUE(contains(md, "No plots: --python /nonexistent/python3 cannot import matplotlib"))
      << md;
  EXPECT_FALSE(contains(md, "![")) << md;
  EXPECT_TRUE(contains(md, "## Summary")) << md;
}

TEST_F(ReportOfRun, FailingPlotScriptIsAnError) {
  if (!matplotlib_available()) GTEST_SKIP() << "no python3 with matplotlib";
  TempDir scratch;
  std::ofstream(scratch / "plot.py") << "import sys\nsys.exit('broken on purpose')\n";
  const Command report = run_command(std::string(TRAINER_BINARY) + " report " + run_dir() +
                                     " --plot-script " + (scratch / "plot.py"));
  EXPECT_EQ(report.exit_code, 1) << report.output;
  EXPECT_TRUE(contains(report.output, "broken on purpose")) << report.output;
  EXPECT_TRUE(contains(read_file(run_dir() + "/report.md"), "No plots: plot.py failed"));
}

// A run folder written by hand: metrics lines with known medians and per-rank peaks, targets
// and events.
TEST(Report, TargetsEventsAndMedians) {
  TempDir dir;
  std::ofstream metrics(dir / "metrics.jsonl");
  const double tokens[] = {100, 1000, 3000, 2000};
  for (int step = 1; step <= 4; ++step) {
    metrics << "{\"step\": " << step << ", \"loss\": " << 5 - step
            << ", \"tokens_per_s\": " << tokens[step - 1]
            << ", \"model_tflops\": 2, \"hardware_tflops\": 2.5"
            << (step == 2 ? ", \"val_loss\": 2.5" : "")
            << ", \"rank_peak_activation_bytes\": [2048, " << 1000 + step
            << "], \"rank_predicted_activation_peak_bytes\": [2048, 1536]}\n";
  }
  metrics << "{\"step\": 5, \"loss\": nan, \"tokens_per_s\": 1500}\n";
  metrics.close();
  std::ofstream(dir / "config.yaml")
      << "train: {steps: 5}\ntargets:\n  min_tokens_per_s: 5000\n  max_memory_gib: 20\n"
         "  window: 2\n  action: warn\n";
  std::ofstream(dir / "events.jsonl")
      << R"({"time": "2026-01-01T00:00:00Z", "step": 0, "rank": "all", "event": "start"})"
         "\n"
      << R"({"time": "2026-01-01T00:00:09Z", "step": 3, "rank": "all", "event": "target_miss",)"
      << R"( "target": "min_tokens_per_s", "measured": 2000, "limit": 5000, "action": "warn"})"
      << "\n"
      << R"({"time": "2026-01-01T00:00:12Z", "step": 4, "rank": 1, "event": "checkpoint"})"
      << "\n";
  const trainer::RunRecord run = trainer::read_run(dir.str());
  const std::string md = trainer::report_markdown(run, {});
  for (const char* piece :
       {"| loss | nan (step 5) | 1.0000 (step 4) |", "| validation loss | 2.5000 (step 2) |",
        "median over steps 2–5", "| tokens/s | 1750 |",  // of 1000, 3000, 2000, 1500
        "| recompute FLOPs / model FLOPs | 25.0% |",
        "| min_tokens_per_s | 5000 | missed at step 3 (target=min_tokens_per_s, measured=2000, "
        "limit=5000, action=warn) |",
        "| max_memory_gib | 20 | met |", "- window: 2", "- target_miss events: 1",
        "| 4 | 2026-01-01T00:00:12Z | 1 | checkpoint |  |", "- start: 1",
        "| 0 | 2.0 KiB | 2.0 KiB | 0 |", "| 1 | 1004 B | 1.5 KiB | −532 B |"}) {
    EXPECT_TRUE(contains(md, piece)) << "'" << piece << "' not in:\n" << md;
  }
}

// A blend's per-dataset validation losses (val_loss/<name>) get rows of their own.
TEST(Report, BlendedDatasetsValidationLossesAreRows) {
  TempDir dir;
  std::ofstream metrics(dir / "metrics.jsonl");
  for (int step = 1; step <= 4; ++step) {
    metrics << "{\"step\": " << step << ", \"loss\": " << 5 - step;
    if (step % 2 == 0) {
      metrics << ", \"val_loss\": " << 3 - step / 2 << ".5, \"val_loss/web\": " << 4 - step / 2
              << ".25, \"val_loss/web_2\": " << (step == 2 ? "1.5" : "1.75");
    }
    metrics << "}\n";
  }
  metrics.close();
  const std::string md = trainer::report_markdown(trainer::read_run(dir.str()), {});
  for (const char* piece : {"| validation loss | 1.5000 (step 4) | 1.5000 (step 4) |",
                            "| validation loss, web | 2.2500 (step 4) | 2.2500 (step 4) |",
                            "| validation loss, web_2 | 1.7500 (step 4) | 1.5000 (step 2) |"}) {
    EXPECT_TRUE(contains(md, piece)) << "'" << piece << "' not in:\n" << md;
  }
}

TEST(Report, MissingOrCorruptInputNamesTheFileAndLine) {
  TempDir dir;
  using runtime::InputError;
  expect_error<InputError>([&] { trainer::read_run(dir / "nothing"); },
                           {"run directory", "nothing", "does not exist"}, "missing folder");
  expect_error<InputError>([&] { trainer::read_run(dir.str()); },
                           {dir / "metrics.jsonl", "no such file"}, "no metrics.jsonl");
  std::ofstream(dir / "metrics.jsonl") << "{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"lo\n";
  expect_error<InputError>([&] { trainer::read_run(dir.str()); },
                           {dir / "metrics.jsonl line 2", "not JSON"}, "truncated line");
  std::ofstream(dir / "metrics.jsonl") << "{\"step\": 1, \"loss\": 2}\n\n{\"step\": 3}\n";
  expect_error<InputError>([&] { trainer::read_run(dir.str()); },
                           {dir / "metrics.jsonl line 3", "no number \"loss\""}, "no loss");
  std::ofstream(dir / "metrics.jsonl") << "";
  expect_error<InputError>([&] { trainer::read_run(dir.str()); }, {"metrics.jsonl", "no steps"},
                           "empty metrics");
  std::ofstream(dir / "metrics.jsonl") << "{\"step\": 1, \"loss\": 2}\n";
  std::ofstream(dir / "events.jsonl") << "[1, 2]\n";
  expect_error<InputError>([&] { trainer::read_run(dir.str()); },
                           {dir / "events.jsonl line 1", "not a JSON object"}, "events not object");
  const Command cli = run_command(std::string(TRAINER_BINARY) + " report " + (dir / "nothing"));
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_TRUE(contains(cli.output, "error: report: run directory")) << cli.output;
  EXPECT_EQ(run_command(std::string(TRAINER_BINARY) + " report").exit_code, 1);
}

TEST(Report, HelpAndArguments) {
  const Command help = run_command(std::string(TRAINER_BINARY) + " --help");
  EXPECT_TRUE(contains(help.output, "report RUN_DIR [--plot-script")) << help.output;
  expect_error<runtime::InputError>(
      [] {
        trainer::parse_report_args({"a", "b"});
      },
      {"report: unknown argument 'b'"}, "two run folders");
  expect_error<runtime::InputError>(
      [] {
        trainer::parse_report_args({"a", "--python"});
      },
      {"report: --python needs a value"}, "flag without value");
  const trainer::ReportArgs args = trainer::parse_report_args({"--python", "py", "run"});
  EXPECT_EQ(args.run_dir, "run");
  EXPECT_EQ(args.python, "py");
  EXPECT_EQ(args.plot_script, "");
}

}  // namespace
