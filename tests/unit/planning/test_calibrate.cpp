// trainer calibrate on the host: a profile at the run's shapes that the cost model takes as its
// own, JSON that reads back equal, and bad profiles named by file and field.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/allocator.h"
#include "runtime/error.h"
#include "trainer/commands/calibrate_command.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/calibrate.h"
#include "trainer/planning/cost_model.h"

namespace trainer {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".json"))
      .string();
}

TEST(Calibrate, ProfileMatchesTheRunAndReadsBack) {
  for (const char* attention : {"unfused", "flash"}) {
    const Config config = parse_config(
        "", "test",
        {"model.num_layers=4", "model.hidden_size=64", "model.num_attention_heads=4",
         "model.seq_length=32", "model.vocab_size=96", "parallel.tensor=2",
         "parallel.sequence_parallel=true", "parallel.pipeline=2", "train.micro_batch_size=2",
         "train.global_batch_size=8", std::string("model.attention_backend=") + attention,
         "model.hidden_dropout=0.1"},
        ConfigUse::plan);
    runtime::CpuAllocator allocator;
    const TimeProfile p =
        calibrate(config, allocator, {.warmup = 1, .repeats = 3, .min_seconds = 0});
    EXPECT_EQ(p.repeats, 3);
    EXPECT_EQ(p.ranks, 1);
    EXPECT_FALSE(p.collectives_measured);  // alone: the replay's collectives
    const StageSetup setup = make_stage_setup(config, 0, 0);
    EXPECT_EQ(p.shapes, profile_shape_key(config, setup));
    EXPECT_GT(p.layer_forward_s, 0);
    EXPECT_GT(p.layer_backward_s, 0);
    // Note [Cold stash]: what a layer's stash costs when it waits in a step, per layer; a
    // measurement that timed all of a step's layers as one would read several layers' worth.
    EXPECT_LT(p.stash_cold_forward_s, 2 * p.layer_forward_s);
    EXPECT_LT(p.stash_cold_backward_s, 2 * p.layer_backward_s);
    EXPECT_GT(p.gemm_gflops, 0);
    EXPECT_GT(p.optimizer_s_per_param, 0);
    ASSERT_EQ(p.rebuild.size(), 4u);
    const CostModel costs({}, p, "p.json");
    EXPECT_TRUE(costs.times(config, setup).from_profile);
    EXPECT_EQ(allocator.stats()[runtime::MemoryCategory::param].current, 0);  // all freed

    const std::string path = temp_path("profile");
    write_time_profile(p, path);
    const TimeProfile back = read_time_profile(path);
    EXPECT_EQ(time_profile_json(back), time_profile_json(p));
    std::filesystem::remove(path);
  }
}

// A calibration of a run that masks documents takes them, and one that does not takes none
// (Note [Timed documents]): either mismatch is refused before anything is timed.
TEST(Calibrate, DocumentsAreGivenExactlyWhenTheRunMasksThem) {
  const std::vector<std::string> shapes = {
      "model.num_layers=2",       "model.hidden_size=32", "model.num_attention_heads=2",
      "model.seq_length=16",      "model.vocab_size=128", "train.micro_batch_size=2",
      "train.global_batch_size=4"};
  std::vector<std::string> masked_overrides = shapes;
  masked_overrides.insert(masked_overrides.end(),
                          {"data.reset_attention_mask=true", "data.eod_id=101"});
  const Config plain = parse_config("", "test", shapes, ConfigUse::plan);
  const Config masked = parse_config("", "test", masked_overrides, ConfigUse::plan);
  runtime::CpuAllocator allocator;
  CalibrationOptions quick{.warmup = 0, .repeats = 1, .min_seconds = 0};
  EXPECT_THROW(calibrate(masked, allocator, quick), runtime::InputError);
  // Two microbatches: the second's samples hold two documents each, split at rows 5 and 9.
  std::vector<int32_t> one(16 * 2, 0), two(16 * 2, 0);
  for (int32_t t = 0; t < 16; ++t)
    for (int32_t b = 0; b < 2; ++b) two[t * 2 + b] = t >= (b == 0 ? 5 : 9) ? (b == 0 ? 5 : 9) : 0;
  quick.document_starts = {one, two};
  EXPECT_THROW(calibrate(plain, allocator, quick), runtime::InputError);
  const TimeProfile p = calibrate(masked, allocator, quick);
  const StageSetup setup = make_stage_setup(masked, 0, 0);
  EXPECT_EQ(p.shapes, shape_key(setup.dims, vocab_shard(masked), true));
  EXPECT_TRUE(CostModel({}, p, "p.json").matches(masked, setup));
  EXPECT_FALSE(CostModel({}, p, "p.json").matches(plain, setup));
}

TEST(Calibrate, BadProfilesNameTheFileAndTheField) {
  const std::string path = temp_path("bad-profile");
  auto rejected = [&](const std::string& text, const std::string& expected) {
    std::ofstream(path) << text;
    try {
      read_time_profile(path);
    } catch (const runtime::InputError& e) {
      const std::string message = e.what();
      return message.find(path) != std::string::npos && message.find(expected) != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(rejected("{not json", "not a JSON time profile"));
  EXPECT_TRUE(rejected("{\"format\": 2}", "'device' is missing"));
  EXPECT_TRUE(rejected("{\"format\": 1}", "format 1, this trainer reads 2"));
  EXPECT_TRUE(rejected("{\"format\": 7}", "format 7"));
  TimeProfile p;
  p.gemm_gflops = 1;
  p.copy_gbps = 1;
  std::string json = time_profile_json(p);
  json.replace(json.find("\"layer_forward_s\": 0"), 20, "\"layer_forward_s\": -1");
  EXPECT_TRUE(rejected(json, "'layer_forward_s' must be >= 0"));
  json = time_profile_json(p);
  json.replace(json.find("\"ranks\": 1"), 10, "\"ranks\": 0");
  EXPECT_TRUE(rejected(json, "'ranks' must be >= 1, got 0"));
  json = time_profile_json(p);
  json.replace(json.find("\"stash_cold_backward_s\": 0"), 26, "\"stash_cold_backward_s\": -1");
  EXPECT_TRUE(rejected(json, "'stash_cold_backward_s' must be >= 0"));
  // A profile written before the cold-stash fields reads with them 0.
  p.stash_cold_forward_s = 1e-3;
  json = time_profile_json(p);
  for (const char* field : {"stash_cold_forward_s", "stash_cold_backward_s"}) {
    const size_t at = json.find(std::string("\"") + field);
    json.erase(at, json.find('\n', at) - at + 1);
  }
  std::ofstream(path) << json;
  EXPECT_EQ(read_time_profile(path).stash_cold_forward_s, 0);
  std::filesystem::remove(path);
  EXPECT_THROW(read_time_profile(path), runtime::InputError);  // missing file
}

TEST(Calibrate, ArgumentsAreCheckedByName) {
  auto error = [](const std::vector<std::string>& args) -> std::string {
    try {
      parse_calibrate_args(args);
    } catch (const runtime::InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error({}).find("--config FILE is required"), std::string::npos);
  EXPECT_NE(error({"--config", "a.yaml", "--repeats", "0"}).find("--repeats needs a count"),
            std::string::npos);
  EXPECT_NE(error({"--config", "a.yaml", "--repeats", "3x"}).find("got '3x'"), std::string::npos);
  EXPECT_NE(error({"--config", "a.yaml", "--bogus"}).find("unknown argument '--bogus'"),
            std::string::npos);
  EXPECT_NE(error({"--config"}).find("--config needs a value"), std::string::npos);
  const CalibrateArgs ok =
      parse_calibrate_args({"--config", "a.yaml", "--out", "p.json", "--repeats", "7"});
  EXPECT_EQ(ok.out_path, "p.json");
  EXPECT_EQ(ok.options.repeats, 7);
  EXPECT_EQ(ok.options.min_seconds, 2.0);
  EXPECT_EQ(
      parse_calibrate_args({"--config", "a.yaml", "--min-seconds", "0.5"}).options.min_seconds,
      0.5);
  EXPECT_NE(
      error({"--config", "a.yaml", "--min-seconds", "-1"}).find("--min-seconds needs seconds"),
      std::string::npos);
  EXPECT_NE(error({"--config", "a.yaml", "--min-seconds", "x"}).find("got 'x'"), std::string::npos);
}

// Rounds go on past --repeats until they span min_seconds.
TEST(Calibrate, RoundsSpanTheWindow) {
  const Config config =
      parse_config("", "test",
                   {"model.num_layers=2", "model.hidden_size=32", "model.num_attention_heads=2",
                    "model.seq_length=16", "model.vocab_size=64", "train.micro_batch_size=1",
                    "train.global_batch_size=1"},
                   ConfigUse::plan);
  runtime::CpuAllocator allocator;
  const auto start = std::chrono::steady_clock::now();
  const TimeProfile p =
      calibrate(config, allocator, {.warmup = 0, .repeats = 1, .min_seconds = 0.3});
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.3);
  EXPECT_GT(p.repeats, 1);
}

}  // namespace
}  // namespace trainer
