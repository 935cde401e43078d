// Operating a run: the metrics history and the ledger across resume, the divergence guard
// (rewind equals a run that never read the skipped window; a rewound run resumes as it
// continues), target gates, and one ledger line per event kind a single process can trigger.
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "trainer/observe/event_ledger.h"
#include "trainer/run/run_checks.h"
#include "trainer/run/skipped_batches.h"
#include "trainer/run/stop_signals.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::InProcessRun;
using testing_support::read_lines;

// A metrics.jsonl line without the fields that measure time.
std::string without_timing(std::string line) {
  for (const char* key : {"tokens_per_s", "step_ms", "grad_reduce_wait_ms",
                          "grad_reduce_in_backward_ms", "model_tflops", "hardware_tflops",
                          "mfu_percent", "hfu_percent"}) {
    const size_t begin = line.find(std::string("\"") + key + "\": ");
    const size_t end = line.find(", ", begin);
    if (begin != std::string::npos && end != std::string::npos) line.erase(begin, end + 2 - begin);
  }
  return line;
}

// The ledger lines of `kind`.
std::vector<std::string> events_of(const std::string& path, const std::string& kind) {
  std::vector<std::string> found;
  for (const std::string& line : read_lines(path))
    if (line.find("\"event\": \"" + kind + "\"") != std::string::npos) found.push_back(line);
  return found;
}

bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

std::vector<int64_t> steps_of(const std::string& metrics_path) {
  std::vector<int64_t> steps;
  for (const std::string& line : read_lines(metrics_path))
    steps.push_back(*step_of_json_line(line));
  return steps;
}

TEST(RunFiles, ResumeKeepsTheMetricsHistory) {
  CorpusDir dir;
  const std::vector<std::string> common = {"optimizer.lr_decay_steps=8",
                                           "model.hidden_dropout=0.1"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  InProcessRun whole(dir.config("whole", with({"train.steps=8"})));
  whole.trainer->run();
  // Six steps with checkpoints at 4 and 6; the resume goes back to 4, so the lines of steps
  // 5 and 6 belong to a lost tail.
  const std::vector<std::string> split = {"checkpoint.dir=" + dir / "ckpt", "checkpoint.interval=4",
                                          "checkpoint.keep_last=0"};
  InProcessRun first(dir.config("run", with({"train.steps=6", split[0], split[1], split[2]})));
  first.trainer->run();
  InProcessRun resumed(dir.config("run", with({"train.steps=8", split[0], split[1], split[2]})));
  ASSERT_TRUE(resumed.trainer->resume(dir / "ckpt/step_00000004"));
  resumed.trainer->run();

  const auto whole_lines = read_lines(dir / "whole/metrics.jsonl");
  const auto lines = read_lines(dir / "run/metrics.jsonl");
  EXPECT_EQ(steps_of(dir / "run/metrics.jsonl"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(lines.size(), whole_lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(without_timing(lines[i]), without_timing(whole_lines[i])) << "line " << i;
  // The ledger: the first run's start and checkpoint 4, then the resumed run's lines.
  std::vector<std::string> kinds;
  for (const std::string& line : read_lines(dir / "run/events.jsonl")) {
    const size_t at = line.find("\"event\": \"") + 10;
    kinds.push_back(line.substr(at, line.find('"', at) - at) + "@" +
                    std::to_string(*step_of_json_line(line)));
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"start@0", "checkpoint@4", "start@4", "resume@4",
                                             "checkpoint@8", "end@8"}));
}

TEST(Guard, RewindEqualsARunThatNeverReadTheWindowAndResumesAsItContinues) {
  CorpusDir dir;
  const std::vector<std::string> common = {"train.steps=10", "model.hidden_dropout=0.1"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  const std::vector<std::string> guarded = {
      "checkpoint.dir=" + dir / "ckpt", "checkpoint.interval=4", "checkpoint.keep_last=0",
      "train.guard.action=rewind",      "train.guard.window=2",  "train.inject.step=7",
      "train.inject.scale_loss=100"};
  InProcessRun rewound(dir.config("rewound", with(guarded)));
  const TrainSummary summary = rewound.trainer->run();
  EXPECT_EQ(summary.stop, StopReason::completed);
  EXPECT_EQ(rewound.trainer->rewinds(), 1);
  // Step 7 spiked; the last checkpoint was step 4, so batches 4-6 (steps 5-7) are skipped.
  EXPECT_EQ(rewound.trainer->skipped_batches().to_text(), "4-6");
  const auto rewinds = events_of(dir / "rewound/events.jsonl", "rewind");
  ASSERT_EQ(rewinds.size(), 1u);
  EXPECT_TRUE(contains(rewinds[0], "\"step\": 7,")) << rewinds[0];
  EXPECT_TRUE(contains(rewinds[0], "\"to_step\": 4,")) << rewinds[0];
  EXPECT_TRUE(contains(rewinds[0], "\"skipped_batches\": [4, 6]")) << rewinds[0];
  EXPECT_TRUE(contains(rewinds[0], "\"skipped_samples\": [32, 55]")) << rewinds[0];
  EXPECT_EQ(steps_of(dir / "rewound/metrics.jsonl"),
            (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));

  // A run told up front to skip batches 4-6 never reads them: the same weights, bit for bit.
  InProcessRun never(dir.config("never", with({"data.skip_batches=[[4, 6]]"})));
  never.trainer->run();
  EXPECT_TRUE(
      testing_support::same_bytes(never.trainer->params().flat, rewound.trainer->params().flat));
  const auto never_lines = read_lines(dir / "never/metrics.jsonl");
  const auto rewound_lines = read_lines(dir / "rewound/metrics.jsonl");
  ASSERT_EQ(never_lines.size(), rewound_lines.size());
  for (size_t i = 0; i < never_lines.size(); ++i)
    EXPECT_EQ(without_timing(never_lines[i]), without_timing(rewound_lines[i])) << "line " << i;

  // Resuming the rewound run from its step-8 checkpoint reads the skip list from it.
  InProcessRun resumed(dir.config("resumed", with(guarded)));
  ASSERT_TRUE(resumed.trainer->resume(dir / "ckpt/step_00000008"));
  EXPECT_EQ(resumed.trainer->skipped_batches().to_text(), "4-6");
  EXPECT_EQ(resumed.trainer->rewinds(), 1);
  resumed.trainer->run();
  EXPECT_TRUE(
      testing_support::same_bytes(resumed.trainer->params().flat, rewound.trainer->params().flat));
  const auto resumed_lines = read_lines(dir / "resumed/metrics.jsonl");
  ASSERT_EQ(resumed_lines.size(), 2u);
  EXPECT_EQ(without_timing(resumed_lines[0]), without_timing(rewound_lines[8]));
  EXPECT_EQ(without_timing(resumed_lines[1]), without_timing(rewound_lines[9]));
}

TEST(Guard, MaxRewindsStopsWithACheckpoint) {
  CorpusDir dir;
  InProcessRun run(dir.config(
      "run", {"train.steps=6", "checkpoint.dir=" + dir / "ckpt", "train.guard.action=rewind",
              "train.guard.window=2", "train.guard.max_rewinds=0", "train.inject.step=4",
              "train.inject.scale_loss=100"}));
  const TrainSummary summary = run.trainer->run();
  EXPECT_EQ(summary.stop, StopReason::diverged);
  EXPECT_EQ(exit_code(summary.stop), kExitDiverged);
  EXPECT_EQ(run.trainer->step(), 4);
  EXPECT_EQ(read_lines(dir / "ckpt/latest").at(0), "step_00000004");
  EXPECT_TRUE(contains(run.log.str(),
                       "stopped by train.guard: a spike at step 4 after 0 rewinds "
                       "(train.guard.max_rewinds 0) after step 4"))
      << run.log.str();
  const auto ends = events_of(dir / "run/events.jsonl", "end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_TRUE(contains(ends[0], "\"reason\": \"diverged\"")) << ends[0];
  EXPECT_TRUE(contains(ends[0], "\"exit_code\": 4")) << ends[0];
}

TEST(Guard, SkipStepDropsTheSpikedUpdateAndWarnKeepsIt) {
  CorpusDir dir;
  const std::vector<std::string> spike = {"train.steps=4", "train.guard.window=2",
                                          "train.inject.step=3", "train.inject.scale_loss=100"};
  auto with = [&](const std::string& action) {
    std::vector<std::string> all = spike;
    all.push_back("train.guard.action=" + action);
    return all;
  };
  InProcessRun skip(dir.config("skip", with("skip_step")));
  skip.trainer->train_step();
  skip.trainer->train_step();
  const std::vector<float> after_two(
      skip.trainer->params().flat.f32(),
      skip.trainer->params().flat.f32() + skip.trainer->params().flat.numel());
  EXPECT_TRUE(skip.trainer->train_step().update_skipped);
  EXPECT_EQ(std::memcmp(after_two.data(), skip.trainer->params().flat.raw(),
                        after_two.size() * sizeof(float)),
            0);
  const auto skips = events_of(dir / "skip/events.jsonl", "skip_step");
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_TRUE(contains(skips[0], "\"setting\": \"train.guard.action: skip_step\"")) << skips[0];
  EXPECT_EQ(events_of(dir / "skip/events.jsonl", "loss_spike").size(), 1u);

  InProcessRun warn(dir.config("warn", with("warn")));
  warn.trainer->run();
  const auto spikes = events_of(dir / "warn/events.jsonl", "loss_spike");
  ASSERT_EQ(spikes.size(), 1u);
  EXPECT_TRUE(contains(spikes[0], "\"step\": 3,")) << spikes[0];
  EXPECT_TRUE(contains(spikes[0], "\"action\": \"warn\"")) << spikes[0];
  EXPECT_TRUE(events_of(dir / "warn/events.jsonl", "skip_step").empty());
}

TEST(Targets, MaxLossWarnsOrStopsWithACheckpoint) {
  CorpusDir dir;
  const std::vector<std::string> target = {"train.steps=4", "targets.max_loss.at_step=2",
                                           "targets.max_loss.value=0.5", "targets.window=2",
                                           "checkpoint.dir=" + dir / "ckpt"};
  InProcessRun warn(dir.config("warn", target));
  EXPECT_EQ(warn.trainer->run().stop, StopReason::completed);
  const auto misses = events_of(dir / "warn/events.jsonl", "target_miss");
  ASSERT_EQ(misses.size(), 1u);
  EXPECT_TRUE(contains(misses[0], "\"step\": 2,")) << misses[0];
  EXPECT_TRUE(contains(misses[0], "\"target\": \"max_loss\"")) << misses[0];
  EXPECT_TRUE(contains(misses[0], "\"limit\": 0.5,")) << misses[0];
  EXPECT_TRUE(contains(misses[0], "\"action\": \"warn\"")) << misses[0];

  std::vector<std::string> stopping = target;
  stopping.push_back("targets.action=checkpoint_and_stop");
  InProcessRun stop(dir.config("stop", stopping));
  const TrainSummary summary = stop.trainer->run();
  EXPECT_EQ(summary.stop, StopReason::target_missed);
  EXPECT_EQ(exit_code(summary.stop), kExitTargetMissed);
  EXPECT_EQ(stop.trainer->step(), 2);
  EXPECT_EQ(read_lines(dir / "ckpt/latest").at(0), "step_00000002");
  EXPECT_TRUE(contains(stop.log.str(), "stopped by targets.max_loss 0.5")) << stop.log.str();
}

TEST(Ledger, LinesOfEveryKindAProcessTriggers) {
  CorpusDir dir;
  // non_finite and skip_step: a learning rate that makes step 2 non-finite, skipped.
  InProcessRun diverging(
      dir.config("diverging", testing_support::diverging({"train.on_nonfinite=skip_step"})));
  diverging.trainer->train_step();
  diverging.trainer->train_step();
  const auto nonfinite = events_of(dir / "diverging/events.jsonl", "non_finite");
  ASSERT_EQ(nonfinite.size(), 1u);
  EXPECT_TRUE(contains(nonfinite[0], "\"step\": 2, \"rank\": \"all\"")) << nonfinite[0];
  EXPECT_TRUE(contains(nonfinite[0], "\"first_gradient_rank0\": \"")) << nonfinite[0];
  EXPECT_EQ(events_of(dir / "diverging/events.jsonl", "skip_step").size(), 1u);
  // checkpoint failed: checkpoint.dir below a regular file.
  std::ofstream(dir / "blocker") << "a file\n";
  InProcessRun failing(dir.config("failing", {"checkpoint.dir=" + dir / "blocker/ckpt"}));
  EXPECT_ANY_THROW(failing.trainer->run());
  const auto failed = events_of(dir / "failing/events.jsonl", "checkpoint");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(contains(failed[0], "\"status\": \"failed\"")) << failed[0];
  const auto ends = events_of(dir / "failing/events.jsonl", "end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_TRUE(contains(ends[0], "\"reason\": \"error\", \"message\": \"")) << ends[0];
  // start: the config hash, version, revision, layout and plan; every line has the keys.
  const auto lines = read_lines(dir / "failing/events.jsonl");
  ASSERT_GE(lines.size(), 2u);
  const std::string& start = lines[0];
  for (const char* piece :
       {"{\"time\": \"", "\"step\": 0, \"rank\": \"all\", \"event\": \"start\"",
        "\"config_hash\": \"", "\"version\": \"", "\"git_revision\": \"",
        "\"tensor\": 1, \"pipeline\": 1, \"data\": 1", "\"plan_rank0\": \"layers 0-1 none\""})
    EXPECT_TRUE(contains(start, piece)) << piece << " not in " << start;
  EXPECT_EQ(start[start.find("\"time\": \"") + 9 + 10], 'T') << start;  // 2026-12-01T...
  EXPECT_EQ(start[start.find("\"time\": \"") + 9 + 23], 'Z') << start;
}

TEST(RunChecks, DriftEventsOnEnteringADriftAndPerRankPeak) {
  TargetsConfig targets;
  targets.window = 3;
  targets.throughput_drift_fraction = 0.5;
  DriftMonitor drift(targets);
  auto step = [&](int64_t number, double tokens_per_s, int64_t peak, int64_t predicted) {
    StepMetrics m;
    m.step = number;
    m.tokens_per_s = tokens_per_s;
    m.rank_total_peak = {peak, 100};
    m.rank_predicted_total_peak = {predicted, 100};
    return drift.observe(m, number == 1);
  };
  EXPECT_TRUE(step(1, 10, 100, 100).empty());  // warm-up: not in the window
  for (int64_t s = 2; s <= 4; ++s) EXPECT_TRUE(step(s, 1000, 100, 100).empty());
  const std::vector<Event> slow = step(5, 400, 100, 100);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].kind(), "throughput_drift");
  EXPECT_EQ(slow[0].value("running_median"), "1000");
  EXPECT_TRUE(step(6, 400, 100, 100).empty());  // still drifting: no new event
  const std::vector<Event> memory = step(7, 1000, 150, 100);
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0].kind(), "memory_drift");
  EXPECT_EQ(memory[0].rank(), 0);
  EXPECT_EQ(memory[0].value("measured_bytes"), "150");
  EXPECT_EQ(memory[0].value("predicted_bytes"), "100");
  EXPECT_TRUE(step(8, 1000, 150, 100).empty());  // the same peak is reported once
  const std::string line = memory[0].to_json("2026-12-01T10:00:00.000Z");
  EXPECT_EQ(line.rfind("{\"time\": \"2026-12-01T10:00:00.000Z\", \"step\": 7, \"rank\": 0, "
                       "\"event\": \"memory_drift\", ",
                       0),
            0u)
      << line;
}

TEST(RunChecks, TargetsAgreeOnTheSlowestAndLargestRank) {
  TargetsConfig targets;
  targets.min_tokens_per_s = 100;
  targets.max_memory_gib = 2;
  targets.max_loss = {.at_step = 5, .value = 3};
  TargetGate gate(targets);
  const TargetMeasures agreed = TargetGate::agree({{150, 1.0, -1}, {90, 3.0, -1}, {-1, 1.5, -1}});
  EXPECT_EQ(agreed.tokens_per_s, 90);
  EXPECT_EQ(agreed.memory_gib, 3.0);
  const std::vector<TargetMiss> misses = gate.new_misses(agreed);
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[0].target, "min_tokens_per_s");
  EXPECT_EQ(misses[1].target, "max_memory_gib");
  EXPECT_TRUE(gate.new_misses(agreed).empty());                   // still missing: reported once
  EXPECT_TRUE(gate.misses({-1, 1.0, std::nan("")}).size() == 1);  // a NaN loss misses
  EXPECT_TRUE(gate.misses({-1, 1.0, 2.5}).empty());
}

TEST(RunChecks, SkippedBatchesMapStepsAndRoundTrip) {
  SkippedBatches skipped({{.first = 4, .last = 6}});
  EXPECT_EQ(skipped.batch_of_step(4), 3);
  EXPECT_EQ(skipped.batch_of_step(5), 7);
  skipped.add({.first = 7, .last = 7});  // adjacent: merged
  skipped.add({.first = 10, .last = 11});
  EXPECT_EQ(skipped.to_text(), "4-7,10-11");
  EXPECT_EQ(skipped.batch_of_step(5), 8);
  EXPECT_EQ(skipped.batch_of_step(7), 12);
  EXPECT_EQ(SkippedBatches::parse("4-7,10-11", "test").ranges(), skipped.ranges());
  testing_support::expect_error<runtime::InputError>(
      [] { SkippedBatches::parse("4-x", "manifest.json (extra)"); },
      {"manifest.json (extra): malformed skipped batches '4-x'"}, "parsed 4-x");
}

TEST(RunFiles, KeepThroughStepDropsTheTail) {
  testing_support::TempDir dir;
  std::ofstream(dir / "events.jsonl") << "{\"step\": 0}\n{\"step\": 5}\n{\"step\": 3}\n"
                                         "{\"step\": 4}\n{\"step\": 6}\n{\"step\": 2";
  keep_jsonl_through_step(dir / "events.jsonl", 4);
  // Through the last line at or before step 4 (a rewind's step 5 line precedes it and stays).
  EXPECT_EQ(read_lines(dir / "events.jsonl"),
            (std::vector<std::string>{"{\"step\": 0}", "{\"step\": 5}", "{\"step\": 3}",
                                      "{\"step\": 4}"}));
}

// train.exit_duration_minutes: past it, the run stops after the step with its metrics row, a
// checkpoint and exit code 0, and a resume finishes it as one uninterrupted run would, every
// step's row once; never after the last step (that run completes).
TEST(ExitDuration, StopsAfterTheStepWithACheckpointAndResumes) {
  CorpusDir dir;
  InProcessRun whole(dir.config("whole", {"train.steps=4"}));
  whole.trainer->run();

  const std::string ckpt = "checkpoint.dir=" + dir / "ckpt";
  InProcessRun timed(
      dir.config("timed", {"train.steps=4", ckpt, "train.exit_duration_minutes=1e-9"}));
  const TrainSummary summary = timed.trainer->run();
  EXPECT_EQ(summary.stop, StopReason::duration);
  EXPECT_EQ(exit_code(summary.stop), 0);
  EXPECT_EQ(timed.trainer->step(), 1);
  EXPECT_EQ(read_lines(dir / "ckpt/latest").at(0), "step_00000001");
  EXPECT_TRUE(contains(timed.log.str(), "stopped by train.exit_duration_minutes 1e-09: "))
      << timed.log.str();
  const auto ends = events_of(dir / "timed/events.jsonl", "end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_TRUE(contains(ends[0], "\"reason\": \"duration\"")) << ends[0];
  EXPECT_TRUE(contains(ends[0], "\"exit_code\": 0")) << ends[0];

  // The stop keeps its step's row; the resume into the same run directory appends the rest and
  // never writes the stop step's row again.
  EXPECT_EQ(steps_of(dir / "timed/metrics.jsonl"), (std::vector<int64_t>{1}));
  InProcessRun resumed(dir.config("timed", {"train.steps=4", ckpt}));
  ASSERT_TRUE(resumed.trainer->resume("auto"));
  EXPECT_EQ(resumed.trainer->run().stop, StopReason::completed);
  EXPECT_TRUE(
      testing_support::same_bytes(whole.trainer->params().flat, resumed.trainer->params().flat));
  const auto whole_lines = read_lines(dir / "whole/metrics.jsonl");
  const auto lines = read_lines(dir / "timed/metrics.jsonl");
  EXPECT_EQ(steps_of(dir / "timed/metrics.jsonl"), (std::vector<int64_t>{1, 2, 3, 4}));
  ASSERT_EQ(lines.size(), whole_lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(without_timing(lines[i]), without_timing(whole_lines[i])) << "line " << i;

  InProcessRun last(dir.config("last", {"train.steps=1", "train.exit_duration_minutes=1e-9"}));
  EXPECT_EQ(last.trainer->run().stop, StopReason::completed);
}

// SIGTERM, SIGINT and SIGUSR1 (what mpirun forwards to the ranks) each ask for a stop after the
// step while the handlers are installed; the previous handlers come back after.
TEST(StopSignals, TermIntAndUsr1AskForAStopAfterTheStep) {
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
  for (const int signal_number : {SIGTERM, SIGINT, SIGUSR1}) {
    const StopSignals signals;
    EXPECT_EQ(signals.stop_after_step(*groups.world, false), StopSignals::Stop::none);
    EXPECT_EQ(signals.stop_after_step(*groups.world, true), StopSignals::Stop::duration);
    ASSERT_EQ(std::raise(signal_number), 0);
    EXPECT_EQ(signals.stop_after_step(*groups.world, true), StopSignals::Stop::signal)
        << "signal " << signal_number;
  }
  struct sigaction now {};
  sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(OperationsConfig, ErrorsNameTheField) {
  auto parse = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), "data.path=x");
    return parse_config("", "test", overrides);
  };
  testing_support::expect_error<runtime::ConfigError>(
      [&] { parse({"train.guard.action=rewind"}); },
      {"train.guard.action", "checkpoint.dir must be set"}, "rewind without checkpoint.dir");
  testing_support::expect_error<runtime::ConfigError>(
      [&] { parse({"data.skip_batches=[[6, 4]]"}); }, {"data.skip_batches[0]", "got [6, 4]"},
      "a reversed range");
  testing_support::expect_error<runtime::ConfigError>(
      [&] {
        parse({"targets.max_loss.at_step=200", "train.steps=100"});
      },
      {"targets.max_loss.at_step", "200 is beyond train.steps 100"}, "a target never checked");
  testing_support::expect_error<runtime::ConfigError>(
      [&] { parse({"targets.action=checkpoint_and_stop"}); },
      {"targets.action", "checkpoint.dir must be set"}, "a stop without checkpoint.dir");
  testing_support::expect_error<runtime::ConfigError>(
      [&] { parse({"train.exit_duration_minutes=-5"}); },
      {"train.exit_duration_minutes", "must be finite and >= 0", "got -5"}, "a negative duration");
  const Config round = parse({"data.skip_batches=[[1, 2]]", "train.guard.action=warn",
                              "targets.max_loss={at_step: 3, value: 2.5}"});
  EXPECT_EQ(to_yaml(parse_config(to_yaml(round), "round trip")), to_yaml(round));
}

}  // namespace
}  // namespace trainer
