// Sampling from a trained model: greedy and seeded draws are reproducible and top-k holds; an
// export and a checkpoint of one run load the same model and generate the same tokens; the
// dataset's tokenizer decodes; train.sample_interval writes "sample" events; bad input is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "trainer/data/prepare_data.h"
#include "trainer/generate/generate_command.h"
#include "trainer/generate/model_source.h"
#include "trainer/run/train.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::expect_error;
using testing_support::InProcessRun;
using testing_support::read_lines;

TEST(Sampling, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  const std::vector<float> logits = {0.5f, 2.f, -1.f, 2.f};
  SamplingOptions greedy;
  greedy.temperature = 0.f;
  for (int64_t step = 0; step < 5; ++step) EXPECT_EQ(sample_token(logits, greedy, step), 1);
}

TEST(Sampling, SeededDrawsRepeatAndStayInTheTopK) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7) % 13) * 0.3f;
  SamplingOptions options;
  options.top_k = 4;
  options.seed = 11;
  // The 4 largest logits: 12 * 0.3 at i = 11, 24, 37 and 11 * 0.3 at i = 9 (the lowest id of
  // the ties at 11 * 0.3: 9, 22, 35, 48).
  const std::set<int32_t> top = {11, 24, 37, 9};
  std::map<int32_t, int> seen;
  std::vector<int32_t> first, again, other_seed;
  for (int64_t step = 0; step < 2000; ++step) {
    first.push_back(sample_token(logits, options, step));
    ++seen[first.back()];
    again.push_back(sample_token(logits, options, step));
  }
  options.seed = 12;
  for (int64_t step = 0; step < 2000; ++step)
    other_seed.push_back(sample_token(logits, options, step));
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other_seed);
  for (const auto& [id, count] : seen) EXPECT_TRUE(top.count(id)) << "id " << id << " drawn";
  EXPECT_EQ(seen.size(), 4u);
  // The three at 12 * 0.3 are each drawn about exp(0.3) ~ 1.35 times as often as id 9.
  EXPECT_GT(seen[11], seen[9]);
  options.top_k = -1;
  EXPECT_THROW(check_sampling_options(options), runtime::InputError);
}

// A 4-step run over the synthetic corpus with an export and a checkpoint at its end.
struct FinishedRun {
  CorpusDir dir;
  FinishedRun(std::vector<std::string> overrides = {}) {
    overrides.push_back("checkpoint.dir=" + dir / "ckpt");
    overrides.push_back("train.steps=4");
    InProcessRun run(dir.config("run", overrides));
    run.trainer->run();
  }
};

TEST(Generate, ExportAndCheckpointGiveTheSameModelAndTokens) {
  for (const std::string architecture : {"gpt2", "llama"}) {
    std::vector<std::string> overrides;
    if (architecture == "llama") {
      overrides = {"model.architecture=llama", "model.num_attention_heads=4",
                   "model.num_query_groups=2", "model.ffn_hidden_size=48"};
    }
    FinishedRun finished(overrides);
    const auto exported = load_exported_model(finished.dir / "run");
    const auto checkpointed = load_checkpoint_model(finished.dir / "ckpt/step_00000004");
    ASSERT_TRUE(testing_support::same_bytes(exported->params.flat, checkpointed->params.flat))
        << architecture;
    const model::GptConfig& config = exported->config.model;
    const std::vector<int32_t> prompt = {5, 17, 3};
    for (const float temperature : {0.f, 0.8f}) {
      SamplingOptions sampling;
      sampling.temperature = temperature;
      sampling.max_new_tokens = 10;
      sampling.top_k = temperature > 0 ? 20 : 0;
      const Sample a = generate_sample(exported->params, config, prompt, sampling, nullptr);
      const Sample b = generate_sample(checkpointed->params, checkpointed->config.model, prompt,
                                       sampling, nullptr);
      const Sample again = generate_sample(exported->params, config, prompt, sampling, nullptr);
      EXPECT_EQ(a.generated.size(), 10u);
      EXPECT_EQ(a.generated, b.generated) << architecture << " temperature " << temperature;
      EXPECT_EQ(a.generated, again.generated) << architecture << " temperature " << temperature;
    }
  }
}

// The run's export copied to `dir`/hub as the Hub publishes a model: model.safetensors and
// config.json, no config.yaml.
std::filesystem::path published_copy(const FinishedRun& finished) {
  const std::filesystem::path hub = std::filesystem::path(finished.dir / "hub");
  std::filesystem::create_directories(hub);
  for (const char* file : {"model.safetensors", "config.json"})
    std::filesystem::copy_file(std::filesystem::path(finished.dir / "run") / file, hub / file);
  return hub;
}

// A directory as published on the Hugging Face Hub loads from its config.json alone, GPT-2,
// Llama and Qwen3: the same weights and the same greedy tokens as the run's own directory.
TEST(Generate, AHubDirectoryLoadsFromItsConfigJsonAlone) {
  const std::map<std::string, std::string> classes = {
      {"gpt2", "GPT2LMHeadModel"}, {"llama", "LlamaForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};
  for (const auto& [architecture, hf_class] : classes) {
    SCOPED_TRACE(architecture);
    std::vector<std::string> overrides;
    if (architecture != "gpt2") {
      overrides = {"model.architecture=llama", "model.num_attention_heads=4",
                   "model.num_query_groups=2", "model.ffn_hidden_size=48"};
    }
    if (architecture == "qwen3") overrides.push_back("model.qk_layernorm=true");
    FinishedRun finished(overrides);
    const std::filesystem::path hub = published_copy(finished);
    const auto run = load_exported_model(finished.dir / "run");
    const auto published = load_exported_model(hub.string());
    ASSERT_TRUE(testing_support::same_bytes(run->params.flat, published->params.flat));
    EXPECT_EQ(model::hf_class_name(published->config.model), hf_class);
    SamplingOptions greedy;
    greedy.temperature = 0.f;
    greedy.max_new_tokens = 8;
    const std::vector<int32_t> prompt = {5, 17, 3};
    EXPECT_EQ(generate_sample(run->params, run->config.model, prompt, greedy, nullptr).generated,
              generate_sample(published->params, published->config.model, prompt, greedy, nullptr)
                  .generated);
  }
}

// `trainer generate --model DIR` on a directory as published (config.json, weights and the
// tokenizer.json beside them, no config.yaml): the model from config.json, the tokenizer from
// tokenizer.json (a small Qwen2-style one here, 2259 ids), a greedy sample continuing the prompt.
TEST(Generate, AHubDirectoryGeneratesWithItsOwnTokenizer) {
  FinishedRun finished({"model.architecture=llama", "model.num_attention_heads=4",
                        "model.num_query_groups=2", "model.ffn_hidden_size=48",
                        "model.vocab_size=2304"});
  const std::filesystem::path hub = published_copy(finished);
  std::ostringstream out;
  const GenerateOptions options =
      parse_generate_options({"--model", hub.string(), "--prompt", "the cat", "--max-new-tokens",
                              "4", "--temperature", "0"});
  expect_error<runtime::InputError>([&] { run_generate(options, out); },
                                    {"no tokenizer.json is beside the model"},
                                    "a published directory without a tokenizer");
  std::filesystem::copy_file(std::string(TRAINER_SOURCE_DIR) +
                                 "/tests/unit/tokenizer/data/small_qwen2_style_tokenizer.json",
                             hub / "tokenizer.json");
  EXPECT_EQ(run_generate(options, out), 0);
  EXPECT_EQ(out.str().rfind("the cat", 0), 0u) << out.str();
}

// A byte-tokenized dataset (prepare-data, eod 256) under `dir`/text.
std::string byte_dataset(const testing_support::TempDir& dir) {
  std::ofstream(dir / "docs.txt") << std::string(3000, 'a') + " the cat sat on the mat. ";
  EXPECT_EQ(run_prepare_data({"--input", dir / "docs.txt", "--output-prefix", dir / "text",
                              "--append-eod", "--workers", "1"}),
            0);
  return dir / "text";
}

TEST(Generate, DecodesWithTheDatasetsTokenizerAndRecordsSamples) {
  testing_support::TempDir dir;
  const std::string data = byte_dataset(dir);
  Config config = testing_support::small_config(
      data, dir / "run",
      {"model.vocab_size=257", "train.steps=4", "train.sample_interval=2", "train.sample_tokens=6",
       "train.sample_prompt=the c"});
  InProcessRun run(config);
  run.trainer->run();
  std::vector<std::string> samples;
  for (const std::string& line : read_lines(dir / "run/events.jsonl"))
    if (line.find("\"event\": \"sample\"") != std::string::npos) samples.push_back(line);
  ASSERT_EQ(samples.size(), 2u) << "steps 2 and 4";
  EXPECT_NE(samples[0].find("\"step\": 2"), std::string::npos) << samples[0];
  EXPECT_NE(samples[1].find("\"text\": \"the c"), std::string::npos) << samples[1];
  EXPECT_NE(samples[1].find("\"tokens\": ["), std::string::npos) << samples[1];
  EXPECT_NE(run.log.str().find("sample: step 4: the c"), std::string::npos) << run.log.str();

  // `trainer generate --model`: the dataset's tokenizer from <prefix>.json.
  GenerateOptions options = parse_generate_options(
      {"--model", dir / "run", "--prompt", "the c", "--max-new-tokens", "5", "--temperature", "0"});
  std::ostringstream out;
  EXPECT_EQ(run_generate(options, out), 0);
  EXPECT_EQ(out.str().rfind("the c", 0), 0u) << out.str();

  // Bad input, each named.
  options.sampling.max_new_tokens = 16;  // 5 prompt tokens + 16 > 16 learned positions
  expect_error<runtime::InputError>([&] { run_generate(options, out); },
                                    {"--max-new-tokens 16", "16 learned positions"},
                                    "a sample beyond the learned positions");
  expect_error<runtime::InputError>(
      [&] {
        run_generate(parse_generate_options({"--model", dir / "nothing"}), out);
      },
      {"--model", "nothing", "no such directory"}, "a missing run dir");
  expect_error<runtime::InputError>(
      [&] {
        run_generate(parse_generate_options({"--checkpoint", dir.str()}), out);
      },
      {"--checkpoint", "manifest.json"}, "a step dir without a manifest");
  expect_error<runtime::InputError>(
      [&] {
        parse_generate_options({"--model", "a", "--checkpoint", "b"});
      },
      {"exactly one of --model"}, "both sources");
}

// Sampling gathers the whole model onto rank 0's host: over half of its memory is refused at
// startup, naming the field and both sizes, not left to run out of memory mid-run.
TEST(Generate, SamplingAModelOverHalfTheHostIsRefused) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  check_sampling_fits(8 * kGiB, 16 * kGiB);  // exactly half: taken
  expect_error<runtime::ConfigError>(
      [] { check_sampling_fits(280 * kGiB, 512 * kGiB); },
      {"train.sample_interval", "the whole model in f32 (280.00 GiB)", "its host's 512.00 GiB",
       "set train.sample_interval: 0"},
      "a 70B model on a 512 GiB host");
}

TEST(Generate, PromptIdsBeyondTheModelsVocabularyAreNamed) {
  testing_support::TempDir dir;
  const std::string data = byte_dataset(dir);
  // A plain indexed dataset (no <prefix>.json), so the run does not check its tokenizer.
  std::filesystem::remove(data + ".json");
  InProcessRun run(testing_support::small_config(data, dir / "run", {"train.steps=1"}));
  run.trainer->run();  // model.vocab_size 256: the byte tokenizer's eod (256) does not fit
  std::ostringstream out;
  expect_error<runtime::InputError>(
      [&] {
        run_generate(parse_generate_options({"--model", dir / "run", "--tokenizer", "byte"}), out);
      },
      {"prompt token 0 is id 256", "vocab_size 256"}, "an eod prompt outside the vocabulary");
}

}  // namespace
}  // namespace trainer
