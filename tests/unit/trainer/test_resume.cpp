// Checkpoints in the training loop: N + M steps in one go equal N steps, a
// checkpoint, a resume and M steps (losses and final weights bit for bit);
// non-finite steps stop or are skipped as configured; a checkpoint of another
// model is refused; init_from loads exported weights.
#include <cstring>
#include <fstream>

#include "trainer/export/hf_gpt2.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::InProcessRun;

// The field `key` of a metrics.jsonl line, as written.
std::string field_of(const std::string& line, const std::string& key) {
  const std::string quoted = "\"" + key + "\": ";
  const size_t begin = line.find(quoted) + quoted.size();
  return line.substr(begin, line.find(',', begin) - begin);
}

std::string loss_of(const std::string& line) {
  return field_of(line, "loss");
}

TEST(Resume, SplitRunIsBitIdenticalToOneRun) {
  CorpusDir dir;
  const std::vector<std::string> common = {"train.steps=6", "model.hidden_dropout=0.1",
                                           "model.attention_dropout=0.1", "data.shuffle=true",
                                           "optimizer.lr_warmup_steps=2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  InProcessRun whole(dir.config("whole", with({})));
  whole.trainer->run();

  InProcessRun first(
      dir.config("first", with({"checkpoint.dir=" + dir / "ckpt", "checkpoint.interval=4"})));
  for (int i = 0; i < 4; ++i) first.trainer->train_step();
  first.trainer->save_checkpoint();

  InProcessRun resumed(dir.config("resumed", with({"checkpoint.dir=" + dir / "ckpt"})));
  ASSERT_TRUE(resumed.trainer->resume("auto"));
  EXPECT_EQ(resumed.trainer->step(), 4);
  resumed.trainer->run();

  ASSERT_EQ(whole.trainer->params().flat.numel(), resumed.trainer->params().flat.numel());
  EXPECT_TRUE(
      testing_support::same_bytes(whole.trainer->params().flat, resumed.trainer->params().flat));
  const auto whole_lines = testing_support::read_lines(dir / "whole/metrics.jsonl");
  const auto resumed_lines = testing_support::read_lines(dir / "resumed/metrics.jsonl");
  ASSERT_EQ(whole_lines.size(), 6u);
  ASSERT_EQ(resumed_lines.size(), 2u);  // steps 5 and 6
  EXPECT_EQ(loss_of(resumed_lines[0]), loss_of(whole_lines[4]));
  EXPECT_EQ(loss_of(resumed_lines[1]), loss_of(whole_lines[5]));
  EXPECT_EQ(resumed_lines[0].rfind("{\"step\": 5,", 0), 0u);
}

TEST(Resume, AsyncCheckpointsResumeBitIdentical) {
  CorpusDir dir;
  const std::vector<std::string> async = {
      "train.steps=6",         "model.hidden_dropout=0.1", "checkpoint.dir=" + dir / "ckpt",
      "checkpoint.interval=2", "checkpoint.async=true",    "checkpoint.keep_last=3"};
  InProcessRun whole(dir.config("whole", async));
  whole.trainer->run();
  EXPECT_NE(whole.log.str().find("checkpoint: step 4 written"), std::string::npos)
      << whole.log.str();
  EXPECT_EQ(testing_support::read_lines(dir / "ckpt/latest").at(0), "step_00000006");
  InProcessRun resumed(dir.config("resumed", async));
  ASSERT_TRUE(resumed.trainer->resume(dir / "ckpt/step_00000004"));
  resumed.trainer->run();
  EXPECT_TRUE(
      testing_support::same_bytes(whole.trainer->params().flat, resumed.trainer->params().flat));
}

// The WSD workflow: train at a constant peak, then branch the final decay off any checkpoint
// of the stable phase. Resuming a constant-rate checkpoint of step 4 with wsd over 8 steps
// (decay in the last 4) equals one wsd run of 8 steps: the same rates, losses and weights.
TEST(Resume, WsdDecayBranchedFromAConstantCheckpointEqualsOneWsdRun) {
  CorpusDir dir;
  const std::vector<std::string> wsd = {"train.steps=8", "optimizer.lr_warmup_steps=2",
                                        "optimizer.lr_decay_style=wsd",
                                        "optimizer.lr_wsd_decay_steps=4"};
  InProcessRun whole(dir.config("whole", wsd));
  whole.trainer->run();

  InProcessRun stable(dir.config(
      "stable", {"train.steps=4", "optimizer.lr_warmup_steps=2",
                 "optimizer.lr_decay_style=constant", "checkpoint.dir=" + dir / "ckpt"}));
  stable.trainer->run();
  std::vector<std::string> branch = wsd;
  branch.push_back("checkpoint.dir=" + dir / "ckpt");
  InProcessRun decay(dir.config("decay", branch));
  ASSERT_TRUE(decay.trainer->resume("auto"));
  EXPECT_EQ(decay.trainer->step(), 4);
  decay.trainer->run();

  const auto whole_lines = testing_support::read_lines(dir / "whole/metrics.jsonl");
  const auto stable_lines = testing_support::read_lines(dir / "stable/metrics.jsonl");
  const auto decay_lines = testing_support::read_lines(dir / "decay/metrics.jsonl");
  ASSERT_EQ(whole_lines.size(), 8u);
  ASSERT_EQ(stable_lines.size(), 4u);
  ASSERT_EQ(decay_lines.size(), 4u);
  for (size_t i = 0; i < 8; ++i) {
    const std::string& line = i < 4 ? stable_lines[i] : decay_lines[i - 4];
    EXPECT_EQ(field_of(line, "lr"), field_of(whole_lines[i], "lr")) << "step " << i + 1;
    EXPECT_EQ(loss_of(line), loss_of(whole_lines[i])) << "step " << i + 1;
  }
  // Steps 3-5 at the peak, then down: step 8 is 3 of the 4 decay steps in.
  EXPECT_EQ(field_of(whole_lines[4], "lr"), field_of(whole_lines[2], "lr"));
  EXPECT_LT(std::stod(field_of(whole_lines[5], "lr")), std::stod(field_of(whole_lines[4], "lr")));
  EXPECT_LT(std::stod(field_of(whole_lines[7], "lr")), std::stod(field_of(whole_lines[6], "lr")));
  EXPECT_TRUE(
      testing_support::same_bytes(whole.trainer->params().flat, decay.trainer->params().flat));
}

TEST(Resume, AutoWithoutCheckpointStartsFresh) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", {"checkpoint.dir=" + dir / "none"}));
  EXPECT_FALSE(run.trainer->resume("auto"));
  EXPECT_EQ(run.trainer->step(), 0);
}

TEST(Resume, RefusesACheckpointOfAnotherModel) {
  CorpusDir dir;
  InProcessRun writer(dir.config("a", {"checkpoint.dir=" + dir / "ckpt"}));
  writer.trainer->train_step();
  writer.trainer->save_checkpoint();
  InProcessRun reader(dir.config("b", {"checkpoint.dir=" + dir / "ckpt", "model.num_layers=3"}));
  testing_support::expect_error<runtime::InputError>(
      [&] { reader.trainer->resume("auto"); }, {"model.num_layers 2 in the checkpoint, 3 now"},
      "resumed a 2-layer checkpoint into 3 layers");
  InProcessRun biased(
      dir.config("c", {"checkpoint.dir=" + dir / "ckpt", "model.add_qkv_bias=true"}));
  testing_support::expect_error<runtime::InputError>(
      [&] { biased.trainer->resume("auto"); },
      {"model.add_qkv_bias false in the checkpoint, true now"},
      "resumed a checkpoint without q, k and v biases into a model with them");
  InProcessRun wide(dir.config(
      "d", {"checkpoint.dir=" + dir / "ckpt", "model.kv_channels=40", "output.export=false"}));
  testing_support::expect_error<runtime::InputError>(
      [&] { wide.trainer->resume("auto"); }, {"model.kv_channels ", " in the checkpoint, 40 now"},
      "resumed a checkpoint into heads of another width");
  InProcessRun normed(dir.config("e", {"checkpoint.dir=" + dir / "ckpt", "model.qk_layernorm=true",
                                       "model.normalization=rmsnorm", "output.export=false"}));
  testing_support::expect_error<runtime::InputError>(
      [&] { normed.trainer->resume("auto"); },
      {"model.qk_layernorm false in the checkpoint, true now"},
      "resumed a checkpoint without q and k norms into a model with them");
}

TEST(Nonfinite, StopNamesTheStepAndTensor) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", testing_support::diverging()));
  testing_support::expect_error<runtime::Error>(
      [&] { run.trainer->run(); }, {"[rank 0] step 2: non-finite loss", "(first: gradient of "},
      "a learning rate of 1e30 trained on");
}

TEST(Nonfinite, SkipStepKeepsWeightsThenStopsAfterTheLimit) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", testing_support::diverging({"train.on_nonfinite=skip_step",
                                                                 "train.max_skipped_steps=2"})));
  run.trainer->train_step();  // step 1 is finite and blows the weights up
  const std::vector<float> after_first(
      run.trainer->params().flat.f32(),
      run.trainer->params().flat.f32() + run.trainer->params().flat.numel());
  run.trainer->train_step();  // skipped
  run.trainer->train_step();  // skipped
  EXPECT_EQ(std::memcmp(after_first.data(), run.trainer->params().flat.raw(),
                        after_first.size() * sizeof(float)),
            0);
  EXPECT_NE(run.log.str().find("update skipped"), std::string::npos);
  testing_support::expect_error<runtime::Error>(
      [&] { run.trainer->train_step(); }, {"3 steps skipped in a row > train.max_skipped_steps 2"},
      "a third skip in a row went on");
}

TEST(InitFrom, LoadsExportedWeights) {
  CorpusDir dir;
  InProcessRun trained(dir.config("run", {"train.steps=2", "train.eval_interval=2"}));
  trained.trainer->run();
  InProcessRun fresh(
      dir.config("fresh", {"train.seed=5", "train.init_from=" + dir / "run/model.safetensors"}));
  fresh.trainer->init_from(dir / "run/model.safetensors");
  EXPECT_EQ(fresh.trainer->evaluate(), trained.trainer->evaluate());
}

}  // namespace
}  // namespace trainer
