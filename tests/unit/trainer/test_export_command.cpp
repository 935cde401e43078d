// `trainer export`: a checkpoint written as a Hugging Face model gives the bytes the run's own
// export wrote (GPT-2 and Llama; output.export_dtype bfloat16 too), with config.yaml beside them
// so generate reads the directory; bfloat16 is each float32 value rounded to the nearest even;
// bad flags are named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "tests/support/expect_error.h"
#include "trainer/commands/export_command.h"
#include "trainer/export/safetensors.h"
#include "trainer/generate/model_source.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::expect_error;
using testing_support::InProcessRun;

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// f32 -> bf16 bits, round to nearest even (no NaN in a trained model).
uint16_t nearest_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

TEST(ExportCommand, ACheckpointExportsAsTheRunExportedAndInBfloat16) {
  for (const std::string architecture : {"gpt2", "llama", "qwen3"}) {
    SCOPED_TRACE(architecture);
    CorpusDir dir;
    std::vector<std::string> overrides = {"checkpoint.dir=" + dir / "ckpt", "train.steps=3",
                                          "output.export=true"};
    if (architecture != "gpt2") {
      overrides.insert(overrides.end(),
                       {"model.architecture=llama", "model.num_attention_heads=4",
                        "model.num_query_groups=2", "model.ffn_hidden_size=48"});
    }
    if (architecture == "qwen3") overrides.push_back("model.qk_layernorm=true");
    InProcessRun(dir.config("run", overrides)).trainer->run();
    std::ostringstream out;
    const std::string step = dir / "ckpt/step_00000003";
    ASSERT_EQ(run_export(parse_export_options({"--checkpoint", step, "--output", dir / "f32"}),
                         out),
              0);
    const char* hf_class = architecture == "gpt2"    ? "GPT2LMHeadModel"
                           : architecture == "llama" ? "LlamaForCausalLM"
                                                     : "Qwen3ForCausalLM";
    EXPECT_NE(out.str().find(std::string(hf_class) + " float32"), std::string::npos) << out.str();
    for (const char* file : {"model.safetensors", "config.json"})
      EXPECT_EQ(file_text(std::filesystem::path(dir / "f32") / file),
                file_text(std::filesystem::path(dir / "run") / file))
          << file;
    // The directory is a run's: generate loads it.
    const std::unique_ptr<LoadedModel> whole = load_checkpoint_model(step);
    EXPECT_TRUE(testing_support::same_bytes(load_exported_model(dir / "f32")->params.flat,
                                            whole->params.flat));
    // The export read the checkpoint a parameter at a time: it held at least the largest
    // parameter and far less than the model.
    std::smatch held;
    const std::string said = out.str();
    ASSERT_TRUE(std::regex_search(said, held, std::regex("held at most (\\d+) of the (\\d+) ")))
        << said;
    int64_t largest = 0;
    for (const model::NamedParam& p : whole->params.named)
      largest = std::max(largest, p.tensor.numel());
    EXPECT_EQ(std::stoll(held[2]), whole->params.flat.numel());
    EXPECT_GE(std::stoll(held[1]), largest);
    EXPECT_LT(std::stoll(held[1]), whole->params.flat.numel() / 2);

    ASSERT_EQ(run_export(parse_export_options({"--checkpoint", step, "--output", dir / "bf16",
                                               "--dtype", "bfloat16"}),
                         out),
              0);
    EXPECT_NE(file_text(dir / "bf16/config.json").find("\"torch_dtype\": \"bfloat16\""),
              std::string::npos);
    const SafetensorsFile f32 = read_safetensors(dir / "f32/model.safetensors");
    const SafetensorsFile bf16 = read_safetensors(dir / "bf16/model.safetensors");
    ASSERT_EQ(bf16.tensors.size(), f32.tensors.size());
    for (const auto& [name, wide] : f32.tensors) {
      const SafetensorsEntry& narrow = bf16.tensors.at(name);
      ASSERT_EQ(narrow.dtype, "BF16") << name;
      ASSERT_EQ(narrow.shape, wide.shape) << name;
      const std::vector<float> values = safetensors_f32_values(wide);
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t bits = 0;
        std::memcpy(&bits, narrow.data.data() + 2 * i, 2);
        ASSERT_EQ(bits, nearest_bf16(values[i])) << name << " [" << i << "]";
      }
    }
  }
}

// output.export_dtype: bfloat16 at the end of a run writes what `trainer export --dtype
// bfloat16` writes from the run's last checkpoint.
TEST(ExportCommand, ARunsBfloat16ExportIsTheCommands) {
  CorpusDir dir;
  InProcessRun(dir.config("run", {"checkpoint.dir=" + dir / "ckpt", "train.steps=2",
                                  "output.export=true", "output.export_dtype=bfloat16"}))
      .trainer->run();
  std::ostringstream out;
  run_export(parse_export_options({"--checkpoint", dir / "ckpt/step_00000002", "--output",
                                   dir / "bf16", "--dtype", "bfloat16"}),
             out);
  EXPECT_EQ(file_text(dir / "run/model.safetensors"), file_text(dir / "bf16/model.safetensors"));
  EXPECT_EQ(file_text(dir / "run/config.json"), file_text(dir / "bf16/config.json"));
  EXPECT_EQ(read_safetensors(dir / "run/model.safetensors").tensors.begin()->second.dtype, "BF16");
}

// `trainer hf-config` of an export's config.json prints a model: section that reads back as the
// run's model.
TEST(ExportCommand, HfConfigPrintsTheModelOfAConfigJson) {
  CorpusDir dir;
  InProcessRun(dir.config("run", {"train.steps=1", "output.export=true", "model.architecture=llama",
                                  "model.num_attention_heads=4", "model.num_query_groups=2",
                                  "model.ffn_hidden_size=48", "model.qk_layernorm=true",
                                  "model.hidden_dropout=0", "model.attention_dropout=0"}))
      .trainer->run();
  std::ostringstream out;
  ASSERT_EQ(run_hf_config({dir / "run/config.json"}, out), 0);
  EXPECT_NE(out.str().find("(Qwen3ForCausalLM, "), std::string::npos) << out.str();
  const Config run = load_config(dir / "run/config.yaml", {}, ConfigUse::plan);
  const Config printed = parse_config(out.str(), "hf-config", {}, ConfigUse::plan);
  EXPECT_EQ(model_yaml(printed.model), model_yaml(run.model));
  std::ostringstream ignored;
  testing_support::expect_error<runtime::InputError>(
      [&] { run_hf_config({dir / "missing.json"}, ignored); }, {"hf-config: cannot read"},
      "a missing file");
  testing_support::expect_error<runtime::InputError>([&] { run_hf_config({}, ignored); },
                                                     {"give one config.json"}, "no argument");
}

TEST(ExportCommand, BadFlagsAreNamed) {
  auto refused = [](const std::vector<std::string>& args, const std::string& expected) {
    expect_error<runtime::InputError>([&] { parse_export_options(args); }, {expected},
                                      "accepted: " + expected);
  };
  refused({"--checkpoint", "x"}, "export: give --checkpoint STEP_DIR and --output DIR");
  refused({"--checkpoint", "x", "--output", "y", "--dtype", "fp8"},
          "export: --dtype \"fp8\": expected float32 or bfloat16");
  refused({"--out", "y"}, "export: unknown argument '--out'");
  refused({"--output"}, "export: --output needs a value");
  CorpusDir dir;
  std::ostringstream out;
  expect_error<runtime::InputError>(
      [&] {
        run_export(parse_export_options({"--checkpoint", dir / "none", "--output", dir / "o"}),
                   out);
      },
      {"no manifest.json"}, "a missing checkpoint accepted");
  EXPECT_FALSE(std::filesystem::exists(dir / "o"));
}

}  // namespace
}  // namespace trainer
