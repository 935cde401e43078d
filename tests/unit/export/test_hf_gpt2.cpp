// Tests of the HF GPT-2 conversion: where each element lands in the HF layout (checked by index
// and by computing a layer's QKV/MLP both ways), bit-identical re-import, dtype widening, import
// errors, and config.json in both directions. Small model: L=2, C=8, 2 heads, vocab 10 -> 128.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "model/gpt_params.h"
#include "runtime/allocator.h"
#include "runtime/error.h"
#include "tests/support/expect_error.h"
#include "trainer/export/hf_export.h"
#include "trainer/export/hf_gpt2.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using runtime::InputError;

model::GptConfig small_config() {
  return {.num_layers = 2,
          .hidden_size = 8,
          .num_attention_heads = 2,
          .seq_length = 16,
          .vocab_size = 10,
          .make_vocab_size_divisible_by = 128};
}

std::vector<float> floats_of(const SafetensorsEntry& entry) {
  EXPECT_EQ(entry.dtype, "F32") << entry.name;
  std::vector<float> values(entry.data.size() / 4);
  std::memcpy(values.data(), entry.data.data(), entry.data.size());
  return values;
}

SafetensorsFile as_file(const std::vector<SafetensorsEntry>& entries) {
  SafetensorsFile file;
  for (const SafetensorsEntry& e : entries) file.tensors[e.name] = e;
  return file;
}

// Expects `action` to throw InputError whose message contains every piece of `expected`.
template <typename Action>
void expect_input_error(Action&& action, const std::vector<std::string>& expected) {
  test_support::expect_error<InputError>(action, expected,
                                         "no error; expected: " + expected.front());
}

class HfGpt2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    params_ = model::GptParams::allocate(allocator_, config_, runtime::MemoryCategory::param);
    float* flat = params_.flat.f32();
    for (int64_t i = 0; i < params_.flat.numel(); ++i)
      flat[i] = 1.f + 0.25f * static_cast<float>(i);
  }

  model::GptParams fresh(float fill) {
    model::GptParams p =
        model::GptParams::allocate(allocator_, config_, runtime::MemoryCategory::param);
    std::fill(p.flat.f32(), p.flat.f32() + p.flat.numel(), fill);
    return p;
  }

  std::map<std::string, SafetensorsEntry> exported() const {
    std::map<std::string, SafetensorsEntry> by_name;
    for (SafetensorsEntry& e : hf_entries(hf_gpt2_sources(params_, config_), params_))
      by_name[e.name] = std::move(e);
    return by_name;
  }

  runtime::CpuAllocator allocator_;
  model::GptConfig config_ = small_config();
  model::GptParams params_;
};

TEST_F(HfGpt2Test, ExportWritesExactlyTheHfStateDictNamesAndShapes) {
  const auto hf = exported();
  std::map<std::string, std::vector<int64_t>> expected = {{"transformer.wte.weight", {10, 8}},
                                                          {"transformer.wpe.weight", {16, 8}},
                                                          {"transformer.ln_f.weight", {8}},
                                                          {"transformer.ln_f.bias", {8}}};
  for (const std::string layer : {"0", "1"}) {
    const std::string h = "transformer.h." + layer + ".";
    for (const char* norm : {"ln_1.", "ln_2."}) {
      expected[h + norm + "weight"] = {8};
      expected[h + norm + "bias"] = {8};
    }
    expected[h + "attn.c_attn.weight"] = {8, 24};
    expected[h + "attn.c_attn.bias"] = {24};
    expected[h + "attn.c_proj.weight"] = {8, 8};
    expected[h + "attn.c_proj.bias"] = {8};
    expected[h + "mlp.c_fc.weight"] = {8, 32};
    expected[h + "mlp.c_fc.bias"] = {32};
    expected[h + "mlp.c_proj.weight"] = {32, 8};
    expected[h + "mlp.c_proj.bias"] = {8};
  }
  ASSERT_EQ(hf.size(), expected.size());  // no lm_head.weight: tied
  for (const auto& [name, shape] : expected) {
    ASSERT_EQ(hf.count(name), 1u) << name;
    EXPECT_EQ(hf.at(name).shape, shape) << name;
    EXPECT_EQ(hf.at(name).dtype, "F32") << name;
  }
}

TEST_F(HfGpt2Test, ExportPlacesElementsWhereHfExpectsThem) {
  const auto hf = exported();
  const int64_t C = 8, D = 4, F = 32;
  // wte: the first vocab_size rows, padding dropped; wpe copied as is.
  EXPECT_EQ(floats_of(hf.at("transformer.wte.weight")),
            std::vector<float>(params_.wte.f32(), params_.wte.f32() + 10 * C));
  EXPECT_EQ(floats_of(hf.at("transformer.wpe.weight")),
            std::vector<float>(params_.wpe.f32(), params_.wpe.f32() + 16 * C));

  const model::LayerParams& layer = params_.layers[1];
  const std::vector<float> c_attn = floats_of(hf.at("transformer.h.1.attn.c_attn.weight"));
  const std::vector<float> c_attn_bias = floats_of(hf.at("transformer.h.1.attn.c_attn.bias"));
  // Hand-picked: HF column 13 = k (8..15), head 1 (12..15), d 1 -> model row (1*3 + 1)*4 + 1 = 17.
  EXPECT_EQ(c_attn[2 * 24 + 13], layer.qkv_weight.f32()[17 * C + 2]);
  EXPECT_EQ(c_attn_bias[13], layer.qkv_bias.f32()[17]);
  // Column 3 = q, head 0, d 3 -> model row 3; column 23 = v, head 1, d 3 -> row (1*3+2)*4+3 = 23.
  EXPECT_EQ(c_attn[5 * 24 + 3], layer.qkv_weight.f32()[3 * C + 5]);
  EXPECT_EQ(c_attn[0 * 24 + 23], layer.qkv_weight.f32()[23 * C + 0]);
  EXPECT_EQ(c_attn[7 * 24 + 8], layer.qkv_weight.f32()[4 * C + 7]);  // k head 0 d 0 -> row 4

  // Semantics: HF computes x @ c_attn + b, splits it into q | k | v and each of those into heads
  // of D; the model computes W x + b with rows (head, {q,k,v}, d). Both must give the same q/k/v.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> x(C);
  for (float& v : x) v = uniform(rng);
  for (int64_t head = 0; head < 2; ++head)
    for (int64_t which = 0; which < 3; ++which)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t row = (head * 3 + which) * D + d, column = which * C + head * D + d;
        float model_out = layer.qkv_bias.f32()[row], hf_out = c_attn_bias[column];
        for (int64_t c = 0; c < C; ++c) {
          model_out += layer.qkv_weight.f32()[row * C + c] * x[c];
          hf_out += x[c] * c_attn[c * 3 * C + column];
        }
        EXPECT_EQ(hf_out, model_out) << "head " << head << " which " << which << " d " << d;
      }

  // Conv1D weights are [in, out]: element [i][o] is the model's (out, in) element [o][i].
  const std::vector<float> c_proj = floats_of(hf.at("transformer.h.1.attn.c_proj.weight"));
  const std::vector<float> c_fc = floats_of(hf.at("transformer.h.1.mlp.c_fc.weight"));
  const std::vector<float> mlp_proj = floats_of(hf.at("transformer.h.1.mlp.c_proj.weight"));
  EXPECT_EQ(c_fc[3 * F + 20], layer.fc1_weight.f32()[20 * C + 3]);
  EXPECT_EQ(mlp_proj[20 * C + 3], layer.fc2_weight.f32()[3 * F + 20]);
  EXPECT_EQ(c_proj[1 * C + 6], layer.proj_weight.f32()[6 * C + 1]);
  for (int64_t in = 0; in < C; ++in)
    for (int64_t f = 0; f < F; ++f) {
      ASSERT_EQ(c_fc[in * F + f], layer.fc1_weight.f32()[f * C + in]);
      ASSERT_EQ(mlp_proj[f * C + in], layer.fc2_weight.f32()[in * F + f]);
    }
  EXPECT_EQ(floats_of(hf.at("transformer.h.1.mlp.c_fc.bias")),
            std::vector<float>(layer.fc1_bias.f32(), layer.fc1_bias.f32() + F));
  EXPECT_EQ(floats_of(hf.at("transformer.h.1.ln_2.bias")),
            std::vector<float>(layer.ln2_bias.f32(), layer.ln2_bias.f32() + C));
  EXPECT_EQ(floats_of(hf.at("transformer.ln_f.weight")),
            std::vector<float>(params_.lnf_weight.f32(), params_.lnf_weight.f32() + C));
}

TEST_F(HfGpt2Test, ReimportThroughAFileIsBitIdenticalExceptPaddingRows) {
  const fs::path dir =
      fs::temp_directory_path() / ("trainer_hf_export_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  export_hf(dir.string(), params_, config_);
  const SafetensorsFile file = read_safetensors((dir / "model.safetensors").string());
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  std::ifstream config_in(dir / "config.json");
  const std::string config_text((std::istreambuf_iterator<char>(config_in)),
                                std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  const model::GptConfig back = gpt_config_from_hf_json(config_text, "config.json");
  EXPECT_EQ(back.num_layers, 2);
  EXPECT_EQ(back.vocab_size, 10);

  const model::GptParams imported = fresh(777.f);
  from_hf_gpt2(file, imported, config_);
  for (int64_t i = 0; i < params_.flat.numel(); ++i) {
    const bool padding = i >= 10 * 8 && i < params_.wte.numel();
    ASSERT_EQ(imported.flat.f32()[i], padding ? 0.f : params_.flat.f32()[i]) << "flat index " << i;
  }

  // A model from init_params has zero padding rows, so it round-trips exactly.
  model::init_params(params_, config_, 1234);
  const model::GptParams again = fresh(-5.f);
  from_hf_gpt2(as_file(hf_entries(hf_gpt2_sources(params_, config_), params_)), again, config_);
  EXPECT_EQ(
      std::memcmp(again.flat.f32(), params_.flat.f32(), static_cast<size_t>(params_.flat.nbytes())),
      0);
}

TEST_F(HfGpt2Test, ImportAcceptsBareNamesAndIgnoresTiedHeadAndAttentionBuffers) {
  SafetensorsFile file;
  for (SafetensorsEntry e : hf_entries(hf_gpt2_sources(params_, config_), params_)) {
    e.name = e.name.substr(std::string("transformer.").size());  // the original gpt2 checkpoint
    file.tensors[e.name] = e;
  }
  file.tensors["lm_head.weight"] = file.tensors.at("wte.weight");
  file.tensors["h.0.attn.bias"] = {
      "h.0.attn.bias", "F32", {1, 1, 16, 16}, std::vector<uint8_t>(1024)};
  file.tensors["h.1.attn.masked_bias"] = {
      "h.1.attn.masked_bias", "F32", {}, std::vector<uint8_t>(4)};
  const model::GptParams imported = fresh(0.f);
  from_hf_gpt2(file, imported, config_);
  EXPECT_EQ(std::memcmp(imported.layers[1].qkv_weight.f32(), params_.layers[1].qkv_weight.f32(),
                        static_cast<size_t>(params_.layers[1].qkv_weight.nbytes())),
            0);
  EXPECT_EQ(imported.lnf_bias.f32()[7], params_.lnf_bias.f32()[7]);
}

TEST_F(HfGpt2Test, ImportWidensBf16AndF16) {
  // BF16: the upper half of each f32; widening restores exactly those bits.
  SafetensorsFile file;
  for (SafetensorsEntry e : hf_entries(hf_gpt2_sources(params_, config_), params_)) {
    std::vector<uint8_t> half;
    for (size_t i = 0; i < e.data.size(); i += 4)
      half.insert(half.end(), {e.data[i + 2], e.data[i + 3]});
    file.tensors[e.name] = {e.name, "BF16", e.shape, half};
  }
  // F16 for ln_f.weight: 1, -2, 0.5, smallest subnormal, largest finite, -0, inf, 1/3.
  const uint16_t f16[8] = {0x3c00, 0xc000, 0x3800, 0x0001, 0x7bff, 0x8000, 0x7c00, 0x3555};
  std::vector<uint8_t> f16_bytes(16);
  std::memcpy(f16_bytes.data(), f16, 16);
  file.tensors["transformer.ln_f.weight"] = {"transformer.ln_f.weight", "F16", {8}, f16_bytes};

  const model::GptParams imported = fresh(0.f);
  from_hf_gpt2(file, imported, config_);
  const float* qkv = imported.layers[0].qkv_weight.f32();
  for (int64_t i = 0; i < 24 * 8; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &params_.layers[0].qkv_weight.f32()[i], 4);
    const uint32_t truncated = bits & 0xffff0000u;
    float expected;
    std::memcpy(&expected, &truncated, 4);
    ASSERT_EQ(qkv[i], expected) << i;
  }
  const float* lnf = imported.lnf_weight.f32();
  EXPECT_EQ(lnf[0], 1.f);
  EXPECT_EQ(lnf[1], -2.f);
  EXPECT_EQ(lnf[2], 0.5f);
  EXPECT_EQ(lnf[3], std::ldexp(1.f, -24));
  EXPECT_EQ(lnf[4], 65504.f);
  EXPECT_TRUE(lnf[5] == 0.f && std::signbit(lnf[5]));
  EXPECT_TRUE(std::isinf(lnf[6]) && lnf[6] > 0);
  EXPECT_EQ(lnf[7], 0.333251953125f);
}

TEST_F(HfGpt2Test, ImportTakesTheFirstRowsOfALargerVocabulary) {
  model::GptConfig wide = config_;
  wide.vocab_size = 12;
  model::GptParams wide_params =
      model::GptParams::allocate(allocator_, wide, runtime::MemoryCategory::param);
  for (int64_t i = 0; i < wide_params.flat.numel(); ++i)
    wide_params.flat.f32()[i] = static_cast<float>(i);
  const model::GptParams imported = fresh(9.f);
  from_hf_gpt2(as_file(hf_entries(hf_gpt2_sources(wide_params, wide), wide_params)), imported,
               config_);
  for (int64_t i = 0; i < 128 * 8; ++i)
    ASSERT_EQ(imported.wte.f32()[i], i < 10 * 8 ? wide_params.wte.f32()[i] : 0.f) << i;
}

TEST_F(HfGpt2Test, ImportErrorsNameTheTensorAndLeaveParamsUntouched) {
  const std::vector<SafetensorsEntry> good = hf_entries(hf_gpt2_sources(params_, config_), params_);
  const model::GptParams target = fresh(42.f);
  auto import_with = [&](auto&& edit, const std::vector<std::string>& expected,
                         const model::GptConfig& config) {
    SafetensorsFile file = as_file(good);
    edit(file);
    expect_input_error([&] { from_hf_gpt2(file, target, config); }, expected);
  };
  const model::GptConfig config = config_;
  import_with([](SafetensorsFile& f) { f.tensors.erase("transformer.h.1.mlp.c_fc.bias"); },
              {"missing tensor 'transformer.h.1.mlp.c_fc.bias'"}, config);
  import_with(
      [](SafetensorsFile& f) {
        f.tensors.at("transformer.h.0.attn.c_attn.weight").shape = {24, 8};
      },
      {"'transformer.h.0.attn.c_attn.weight'", "shape [24, 8]", "[8, 24]"}, config);
  import_with(
      [](SafetensorsFile& f) {
        auto& e = f.tensors.at("transformer.ln_f.bias");
        e.dtype = "I32";
      },
      {"'transformer.ln_f.bias'", "dtype I32"}, config);
  import_with(
      [](SafetensorsFile& f) {
        SafetensorsEntry extra = f.tensors.at("transformer.h.1.ln_1.weight");
        extra.name = "transformer.h.2.ln_1.weight";
        f.tensors[extra.name] = extra;
      },
      {"unexpected tensor 'transformer.h.2.ln_1.weight'"}, config);
  model::GptConfig bigger_vocab = config_;
  bigger_vocab.vocab_size = 11;
  const model::GptParams bigger =
      model::GptParams::allocate(allocator_, bigger_vocab, runtime::MemoryCategory::param);
  expect_input_error([&] { from_hf_gpt2(as_file(good), bigger, bigger_vocab); },
                     {"'transformer.wte.weight'", "10 rows", "vocab_size 11"});
  for (int64_t i = 0; i < target.flat.numel(); ++i) ASSERT_EQ(target.flat.f32()[i], 42.f) << i;
}

// ---- config.json ---------------------------------------------------------------------------

TEST(HfGpt2Config, JsonRoundTripsEveryField) {
  model::GptConfig config{.num_layers = 3,
                          .hidden_size = 12,
                          .num_attention_heads = 3,
                          .ffn_hidden_size = 40,
                          .seq_length = 32,
                          .max_position_embeddings = 64,
                          .vocab_size = 300,
                          .hidden_dropout = 0.1f,
                          .attention_dropout = 0.05f,
                          .init_method_std = 0.0123f,
                          .layernorm_epsilon = 1e-6f,
                          .activation = model::Activation::gelu};
  const model::GptConfig back = gpt_config_from_hf_json(hf_gpt2_config_json(config), "test");
  EXPECT_EQ(back.num_layers, 3);
  EXPECT_EQ(back.hidden_size, 12);
  EXPECT_EQ(back.num_attention_heads, 3);
  EXPECT_EQ(back.ffn(), 40);
  EXPECT_EQ(back.positions(), 64);
  EXPECT_EQ(back.seq_length, 64);
  EXPECT_EQ(back.vocab_size, 300);
  EXPECT_EQ(back.hidden_dropout, 0.1f);
  EXPECT_EQ(back.attention_dropout, 0.05f);
  EXPECT_EQ(back.layernorm_epsilon, 1e-6f);
  EXPECT_EQ(back.init_method_std, 0.0123f);
  EXPECT_EQ(back.activation, model::Activation::gelu);

  config.ffn_hidden_size = 0;  // 4 * C -> n_inner null
  config.activation = model::Activation::gelu_tanh;
  const std::string text = hf_gpt2_config_json(config);
  EXPECT_NE(text.find("\"n_inner\": null"), std::string::npos) << text;
  EXPECT_NE(text.find("\"activation_function\": \"gelu_new\""), std::string::npos) << text;
  const model::GptConfig back_default = gpt_config_from_hf_json(text, "test");
  EXPECT_EQ(back_default.ffn_hidden_size, 0);
  EXPECT_EQ(back_default.activation, model::Activation::gelu_tanh);
}

TEST(HfGpt2Config, JsonHasTheFieldsTransformersReads) {
  const std::string text = hf_gpt2_config_json(small_config());
  const YAML::Node root = YAML::Load(text);
  ASSERT_TRUE(root.IsMap());
  EXPECT_EQ(root["architectures"][0].as<std::string>(), "GPT2LMHeadModel");
  EXPECT_EQ(root["model_type"].as<std::string>(), "gpt2");
  EXPECT_EQ(root["n_positions"].as<int>(), 16);
  EXPECT_EQ(root["n_ctx"].as<int>(), 16);
  EXPECT_EQ(root["n_embd"].as<int>(), 8);
  EXPECT_EQ(root["n_layer"].as<int>(), 2);
  EXPECT_EQ(root["n_head"].as<int>(), 2);
  EXPECT_EQ(root["vocab_size"].as<int>(), 10);  // the real vocabulary, not the padded table
  EXPECT_EQ(root["resid_pdrop"].as<std::string>(), "0.1");
  EXPECT_EQ(root["embd_pdrop"].as<std::string>(), "0.1");
  EXPECT_EQ(root["layer_norm_epsilon"].as<std::string>(), "1e-05");
  EXPECT_EQ(root["initializer_range"].as<std::string>(), "0.02");
  EXPECT_EQ(root["tie_word_embeddings"].as<std::string>(), "true");
  EXPECT_EQ(root["torch_dtype"].as<std::string>(), "float32");
  // Pretty-printed, keys sorted as HF's to_json_string writes them.
  EXPECT_EQ(text.rfind("{\n  \"activation_function\": \"gelu_new\",\n  \"architectures\": [\n"
                       "    \"GPT2LMHeadModel\"\n  ],\n",
                       0),
            0u)
      << text;
  std::string previous;
  for (const auto& item : root) {
    EXPECT_LT(previous, item.first.Scalar());
    previous = item.first.Scalar();
  }
}

// The config.json of the original "gpt2" checkpoint on the HF hub (abridged: summary_* and
// task_specific_params dropped). It has no n_inner.
constexpr const char* kGpt2HubConfig = R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_layer": 12,
  "n_positions": 1024,
  "resid_pdrop": 0.1,
  "vocab_size": 50257
})";

TEST(HfGpt2Config, ReadsTheGpt2HubConfig) {
  const model::GptConfig config = gpt_config_from_hf_json(kGpt2HubConfig, "gpt2/config.json");
  EXPECT_EQ(config.num_layers, 12);
  EXPECT_EQ(config.hidden_size, 768);
  EXPECT_EQ(config.num_attention_heads, 12);
  EXPECT_EQ(config.ffn(), 3072);
  EXPECT_EQ(config.positions(), 1024);
  EXPECT_EQ(config.vocab_size, 50257);
  EXPECT_EQ(config.activation, model::Activation::gelu_tanh);
  EXPECT_EQ(config.layernorm_epsilon, 1e-5f);
  EXPECT_EQ(config.attention_dropout, 0.1f);
}

TEST(HfGpt2Config, RejectsMissingAndInvalidFields) {
  auto replaced = [](const std::string& from, const std::string& to) {
    std::string text = kGpt2HubConfig;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  auto expect_rejected = [](const std::string& text, const std::vector<std::string>& expected) {
    expect_input_error([&] { gpt_config_from_hf_json(text, "cfg.json"); }, expected);
  };
  expect_rejected(replaced("\"n_embd\": 768,", ""), {"cfg.json", "\"n_embd\" is missing"});
  expect_rejected(replaced("\"n_positions\": 1024,", ""), {"\"n_positions\" is missing"});
  expect_rejected(replaced("\"n_layer\": 12", "\"n_layer\": \"12\""),
                  {"\"n_layer\" must be a positive integer"});
  expect_rejected(replaced("\"n_head\": 12", "\"n_head\": 0"), {"\"n_head\" must be a positive"});
  expect_rejected(replaced("\"n_head\": 12", "\"n_head\": 7"),
                  {"\"n_embd\"", "not divisible by n_head = 7"});
  expect_rejected(replaced("\"gelu_new\"", "\"relu\""), {"\"activation_function\"", "relu"});
  expect_rejected(replaced("\"embd_pdrop\": 0.1", "\"embd_pdrop\": 0.2"),
                  {"\"embd_pdrop\"", "resid_pdrop"});
  expect_rejected(replaced("\"attn_pdrop\": 0.1", "\"attn_pdrop\": 1.5"),
                  {"\"attn_pdrop\"", "[0, 1)"});
  expect_rejected(replaced("\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": \"small\""),
                  {"\"layer_norm_epsilon\" must be a finite number"});
  expect_rejected(replaced("\"model_type\": \"gpt2\"", "\"model_type\": \"llama\""),
                  {"\"model_type\"", "llama"});
  expect_rejected(
      replaced("\"vocab_size\": 50257", "\"vocab_size\": 50257, \"tie_word_embeddings\": false"),
      {"\"tie_word_embeddings\""});
  expect_rejected(replaced("\"n_ctx\"", "\"n_ctx\" 1024,"), {"cfg.json", "not valid JSON"});
  expect_rejected("[1, 2]", {"not a JSON object"});
}

}  // namespace
}  // namespace trainer
