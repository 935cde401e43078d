// Blended datasets in the training loop: counts per step prefix, a resume bit for bit, each
// dataset's validation loss (val_loss/<name>) and their weighted mean, a blend of one equal to
// data.path, and the tokenizer checks against <path>.json (vocabulary, mixed tokenizers, log).
#include <cmath>
#include <filesystem>

#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::InProcessRun;
using testing_support::name_tokenizer;
using testing_support::read_lines;
using testing_support::TempDir;

// Two synthetic corpora of different chains: `one/corpus` and `two/corpus` (their basenames
// collide, so the metrics name them corpus and corpus_2).
class BlendDir : public TempDir {
 public:
  BlendDir() {
    std::filesystem::create_directories(*this / "one");
    std::filesystem::create_directories(*this / "two");
    testing_support::write_corpus(first(), {.seed = 1, .num_tokens = 12'000});
    testing_support::write_corpus(
        second(), {.seed = 2, .num_tokens = 16'000, .alphabet = 20, .branching = 2});
  }
  std::string first() const { return *this / "one/corpus"; }
  std::string second() const { return *this / "two/corpus"; }
  // The 0.25 / 0.75 blend of the two, in Megatron's flat spelling.
  std::string blend() const { return "data.blend=[0.25, " + first() + ", 0.75, " + second() + "]"; }
  Config config(const std::string& run, std::vector<std::string> overrides) const {
    return testing_support::small_config("", *this / run, std::move(overrides));
  }
};

// The text of `key`'s value in a metrics.jsonl line ("" when absent).
std::string value_of(const std::string& line, const std::string& key) {
  const std::string quoted = "\"" + key + "\": ";
  const size_t at = line.find(quoted);
  if (at == std::string::npos) return "";
  const size_t begin = at + quoted.size();
  return line.substr(begin, line.find_first_of(",}", begin) - begin);
}

TEST(Blend, CountsStayWithinOneSampleOfTheWeightsAtEveryStep) {
  BlendDir dir;
  InProcessRun run(dir.config("run", {dir.blend(), "train.steps=200"}));
  const BlendedSampler& train = run.trainer->data().train();
  const int64_t global_batch = 8;
  std::vector<int64_t> counts(2, 0);
  for (int64_t step = 1; step <= 200; ++step) {
    for (int64_t i = (step - 1) * global_batch; i < step * global_batch; ++i)
      ++counts[static_cast<size_t>(train.draw(i).dataset)];
    const double samples = static_cast<double>(step * global_batch);
    EXPECT_LT(std::abs(static_cast<double>(counts[0]) - 0.25 * samples), 1.0) << "step " << step;
    EXPECT_LT(std::abs(static_cast<double>(counts[1]) - 0.75 * samples), 1.0) << "step " << step;
  }
}

TEST(Blend, ResumeIsBitIdenticalToOneRun) {
  BlendDir dir;
  const std::vector<std::string> common = {
      dir.blend(),          "train.steps=6",     "train.eval_interval=2",
      "train.eval_iters=2", "data.shuffle=true", "model.hidden_dropout=0.1"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  InProcessRun whole(dir.config("whole", with({})));
  whole.trainer->run();
  InProcessRun first(dir.config("first", with({"checkpoint.dir=" + dir / "ckpt"})));
  for (int i = 0; i < 3; ++i) first.trainer->train_step();
  first.trainer->save_checkpoint();
  InProcessRun resumed(dir.config("resumed", with({"checkpoint.dir=" + dir / "ckpt"})));
  ASSERT_TRUE(resumed.trainer->resume("auto"));
  resumed.trainer->run();

  EXPECT_TRUE(
      testing_support::same_bytes(whole.trainer->params().flat, resumed.trainer->params().flat));
  const auto whole_lines = read_lines(dir / "whole/metrics.jsonl");
  const auto resumed_lines = read_lines(dir / "resumed/metrics.jsonl");
  ASSERT_EQ(whole_lines.size(), 6u);
  ASSERT_EQ(resumed_lines.size(), 3u);  // steps 4 to 6
  for (size_t i = 0; i < 3; ++i) {
    for (const char* key :
         {"step", "loss", "grad_norm", "val_loss", "val_loss/corpus", "val_loss/corpus_2"}) {
      EXPECT_EQ(value_of(resumed_lines[i], key), value_of(whole_lines[i + 3], key))
          << key << " at step " << i + 4;
    }
  }
  EXPECT_NE(value_of(whole_lines[3], "val_loss/corpus_2"), "");  // step 4 evaluates
  EXPECT_EQ(value_of(whole_lines[2], "val_loss/corpus_2"), "");  // step 3 does not
}

TEST(Blend, SkippedBatchesSkipTheirBlendSamples) {
  // Weights that do not move (lr 1e-30 is below float resolution) and no dropout: a step's loss
  // is the loss of the batch it reads. Skipping batch 0 makes step s read batch s.
  BlendDir dir;
  const std::vector<std::string> frozen = {dir.blend(),
                                           "data.shuffle=true",
                                           "optimizer.lr=1e-30",
                                           "model.hidden_dropout=0",
                                           "model.attention_dropout=0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), frozen.begin(), frozen.end());
    return extra;
  };
  InProcessRun all(dir.config("all", with({})));
  InProcessRun skipping(dir.config("skipping", with({"data.skip_batches=[[0, 0]]"})));
  std::vector<double> every, skipped;
  for (int step = 0; step < 3; ++step) {
    every.push_back(all.trainer->train_step().loss);
    skipped.push_back(skipping.trainer->train_step().loss);
  }
  EXPECT_NE(every[0], every[1]);
  EXPECT_EQ(skipped[0], every[1]);
  EXPECT_EQ(skipped[1], every[2]);
}

TEST(Blend, EachDatasetIsValidatedOnItsOwnRangeAndValLossIsTheWeightedMean) {
  BlendDir dir;
  InProcessRun blended(dir.config("blend", {dir.blend(), "train.eval_iters=2"}));
  const ValidationLosses losses = blended.trainer->evaluate_datasets();
  ASSERT_EQ(losses.per_dataset.size(), 2u);
  EXPECT_EQ(losses.overall, 0.25 * losses.per_dataset[0] + 0.75 * losses.per_dataset[1]);
  // The same initial weights on each dataset alone (data.path) give each dataset's loss.
  const std::vector<std::string> paths = {dir.first(), dir.second()};
  for (size_t k = 0; k < 2; ++k) {
    InProcessRun alone(dir.config("alone", {"data.path=" + paths[k], "train.eval_iters=2"}));
    EXPECT_EQ(alone.trainer->evaluate(), losses.per_dataset[k]) << paths[k];
  }
  EXPECT_NE(losses.per_dataset[0], losses.per_dataset[1]);

  // The run logs both under their unique names, and the weighted mean as val_loss.
  InProcessRun run(dir.config("run", {dir.blend(), "train.steps=2", "train.eval_interval=2"}));
  run.trainer->run();
  const auto lines = read_lines(dir / "run/metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  const double first = std::stod(value_of(lines[1], "val_loss/corpus"));
  const double second = std::stod(value_of(lines[1], "val_loss/corpus_2"));
  EXPECT_NEAR(std::stod(value_of(lines[1], "val_loss")), 0.25 * first + 0.75 * second, 1e-8);
  const std::string log = run.log.str();
  EXPECT_NE(log.find("data: a blend of 2 datasets"), std::string::npos) << log;
  EXPECT_NE(log.find("corpus_2: " + dir.second() + ", weight 0.75"), std::string::npos) << log;
  EXPECT_NE(log.find("(corpus "), std::string::npos) << log;  // the step line's losses
}

TEST(Blend, ABlendOfOneIsItsDataPath) {
  BlendDir dir;
  const std::vector<std::string> common = {"data.shuffle=true", "train.steps=3"};
  auto with = [&](std::string data) {
    std::vector<std::string> overrides = common;
    overrides.push_back(std::move(data));
    return overrides;
  };
  InProcessRun path(dir.config("path", with("data.path=" + dir.first())));
  InProcessRun one(dir.config("one", with("data.blend=[{path: " + dir.first() + ", weight: 3}]")));
  InProcessRun both(dir.config("both", with(dir.blend())));
  for (int step = 0; step < 3; ++step) {
    const double loss = path.trainer->train_step().loss;
    EXPECT_EQ(one.trainer->train_step().loss, loss) << "step " << step + 1;
    EXPECT_NE(both.trainer->train_step().loss, loss) << "step " << step + 1;
  }
}

TEST(Blend, ATokenizerLargerThanTheModelIsAConfigError) {
  BlendDir dir;
  name_tokenizer(dir.second(), "gpt2", 50257);
  testing_support::expect_error<runtime::ConfigError>(
      [&] { InProcessRun run(dir.config("run", {dir.blend()})); },
      {"model.vocab_size: 256 is below the vocab_size 50257 of the gpt2 tokenizer",
       dir.second() + ".json", "data.blend[1]"},
      "a model of 256 ids trained on a 50257-id tokenizer's data");
  testing_support::expect_error<runtime::ConfigError>(
      [&] { InProcessRun run(dir.config("run", {"data.path=" + dir.second()})); },
      {"256", "50257", dir.second() + ".json", "(data.path)"}, "a single data.path too");
}

TEST(Blend, DatasetsOfDifferentTokenizersAreAConfigError) {
  BlendDir dir;
  name_tokenizer(dir.second(), "hf", 300);
  testing_support::expect_error<runtime::ConfigError>(
      [&] {
        InProcessRun run(dir.config("run", {dir.blend(), "model.vocab_size=512"}));
      },
      {"data.blend: datasets '" + dir.first() + "' (data.blend[0]) and '" + dir.second() +
           "' (data.blend[1]) were made by different tokenizers",
       "byte (vocab_size 256, eod_id none)",
       "hf (vocab_size 300, eod_id 299; hf.json sha256 5eedhf)"},
      "a blend of byte and hf datasets");
}

TEST(Blend, TheLogNamesTheTokenizerOrSaysItIsUnknown) {
  BlendDir dir;
  {
    InProcessRun run(dir.config("known", {dir.blend()}));
    EXPECT_NE(run.log.str().find("tokenizer: byte (vocab_size 256, eod_id none)\n"),
              std::string::npos)
        << run.log.str();
  }
  // A plain Megatron dataset (no <prefix>.json) trains; its tokenizer is unknown.
  std::filesystem::remove(dir.second() + ".json");
  {
    InProcessRun run(dir.config("partly", {dir.blend()}));
    EXPECT_NE(run.log.str().find("tokenizer: byte (vocab_size 256, eod_id none); unknown for " +
                                 dir.second()),
              std::string::npos)
        << run.log.str();
    run.trainer->train_step();
  }
  InProcessRun plain(dir.config("plain", {"data.path=" + dir.second()}));
  EXPECT_NE(plain.log.str().find("tokenizer: unknown (no <path>.json names one)"),
            std::string::npos)
      << plain.log.str();
}

TEST(Blend, DatasetNamesAreBasenamesMadeUnique) {
  EXPECT_EQ(dataset_names({"data/web", "data/code"}), (std::vector<std::string>{"web", "code"}));
  EXPECT_EQ(dataset_names({"a/web", "b/web", "c/web"}),
            (std::vector<std::string>{"web", "web_2", "web_3"}));
  // A suffix another dataset already has as its own name is skipped; a trailing slash is ignored.
  EXPECT_EQ(dataset_names({"a/web", "b/web", "web_2", "x/code/"}),
            (std::vector<std::string>{"web", "web_3", "web_2", "code"}));
}

}  // namespace
}  // namespace trainer
