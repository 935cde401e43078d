// Tests of the LlamaConfig check behind train.init_from: the config.json Meta publishes with
// Llama-3.2-1B is accepted by the model config that matches it (tied head, Llama 3.1's RoPE
// scaling with factor 32) and by its transformers-5 form (rope_parameters); each disagreement is
// refused naming the field; and the export's config.json reads back through the same check. The
// same for Qwen2.5-0.5B's (model.add_qkv_bias), Mistral NeMo's head width (model.kv_channels) and
// Qwen3-0.6B's q and k norms (model.qk_layernorm).
#include <gtest/gtest.h>

#include <string>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "runtime/error.h"
#include "trainer/export/hf_llama.h"

namespace trainer {
namespace {

// Llama-3.2-1B's config.json as published (transformers 4.45).
const char* const kLlama32OneB = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// A tied Llama-family model of this shape, as a continued pretraining run sets it.
model::GptConfig tied_llama(int64_t layers, int64_t hidden, int64_t heads, int64_t groups,
                            int64_t ffn, int64_t vocab, float rotary_base) {
  model::GptConfig config = model::architecture_defaults(model::Architecture::llama);
  config.num_layers = layers;
  config.hidden_size = hidden;
  config.num_attention_heads = heads;
  config.num_query_groups = groups;
  config.ffn_hidden_size = ffn;
  config.seq_length = 4096;
  config.vocab_size = vocab;
  config.rotary_base = rotary_base;
  config.untie_embeddings = false;
  return config;
}

// The model config a continued pretraining run of Llama-3.2-1B sets.
model::GptConfig llama32_one_b() {
  model::GptConfig config = tied_llama(16, 2048, 32, 8, 8192, 128256, 500000.f);
  config.rope_scaling.factor = 32.f;
  return config;
}

void expect_refused(const std::string& json, const model::GptConfig& config,
                    const std::string& expected) {
  try {
    check_hf_llama_config(json, "config.json", config);
    ADD_FAILURE() << "accepted; expected: " << expected;
  } catch (const runtime::InputError& error) {
    EXPECT_NE(std::string(error.what()).find("config.json: " + expected), std::string::npos)
        << error.what();
  }
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(HfLlamaConfig, TheLlama32OneBConfigIsAcceptedByItsModel) {
  EXPECT_NO_THROW(check_hf_llama_config(kLlama32OneB, "config.json", llama32_one_b()));
  // transformers 5 keeps the RoPE fields, rope_theta included, under rope_parameters.
  const std::string v5 =
      replaced(replaced(kLlama32OneB, "\"rope_scaling\"", "\"rope_parameters\""),
               "\"rope_type\": \"llama3\"", "\"rope_type\": \"llama3\", \"rope_theta\": 500000.0");
  EXPECT_NO_THROW(check_hf_llama_config(v5, "config.json", llama32_one_b()));
  // The export's own config.json passes the same check.
  EXPECT_NO_THROW(
      check_hf_llama_config(hf_llama_config_json(llama32_one_b()), "config.json", llama32_one_b()));
}

TEST(HfLlamaConfig, EachDisagreementIsRefusedNamingTheField) {
  model::GptConfig untied = llama32_one_b();
  untied.untie_embeddings = true;
  expect_refused(kLlama32OneB, untied,
                 "tie_word_embeddings true, but model.untie_embeddings is true");
  model::GptConfig plain = llama32_one_b();
  plain.rope_scaling = {};
  expect_refused(kLlama32OneB, plain, "rope_scaling is llama3, but model.rope_scaling.factor is 0");
  model::GptConfig eight = llama32_one_b();
  eight.rope_scaling.factor = 8.f;
  expect_refused(kLlama32OneB, eight,
                 "rope_scaling.factor 32.0 differs from model.rope_scaling.factor 8");
  model::GptConfig theta = llama32_one_b();
  theta.rotary_base = 10000.f;
  expect_refused(kLlama32OneB, theta, "rope_theta 500000.0 differs from model.rotary_base 10000");
  expect_refused(replaced(kLlama32OneB, "\"rope_type\": \"llama3\"", "\"rope_type\": \"dynamic\""),
                 llama32_one_b(), "rope_scaling.rope_type \"dynamic\" is not supported");
  expect_refused(replaced(kLlama32OneB, "\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\""),
                 llama32_one_b(),
                 "rope_scaling.rope_type \"yarn\", but model.rope_scaling.type is llama3");
  expect_refused(replaced(kLlama32OneB, "\"factor\": 32.0", "\"factor\": \"big\""), llama32_one_b(),
                 "rope_scaling.factor \"big\" is not a number");
  expect_refused(replaced(kLlama32OneB, "\"rope_theta\": 500000.0", "\"rope_theta\": \"5e5x\""),
                 llama32_one_b(), "rope_theta \"5e5x\" is not a number");
  expect_refused(replaced(kLlama32OneB, "\"low_freq_factor\": 1.0,", ""), llama32_one_b(),
                 "rope_scaling.low_freq_factor is missing");
  expect_refused(replaced(kLlama32OneB, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 4"),
                 llama32_one_b(), "num_key_value_heads 4 differs from model.num_query_groups 8");
}

// Qwen2.5-0.5B's config.json as published (transformers 4.40): Llama's block with q, k and v
// biases, a window size that use_sliding_window leaves off.
const char* const kQwen25HalfB = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
  "use_sliding_window": false, "vocab_size": 151936})";

model::GptConfig qwen25_half_b() {
  model::GptConfig config = tied_llama(24, 896, 14, 2, 4864, 151936, 1000000.f);
  config.layernorm_epsilon = 1e-6f;
  config.add_qkv_bias = true;
  return config;
}

TEST(HfLlamaConfig, TheQwen25HalfBConfigIsAcceptedByItsModel) {
  EXPECT_NO_THROW(check_hf_llama_config(kQwen25HalfB, "config.json", qwen25_half_b()));
  const std::string exported = hf_llama_config_json(qwen25_half_b());
  EXPECT_NE(exported.find("\"architectures\": [\n    \"Qwen2ForCausalLM\"\n  ]"), std::string::npos)
      << exported;
  EXPECT_NO_THROW(check_hf_llama_config(exported, "config.json", qwen25_half_b()));
  model::GptConfig no_bias = qwen25_half_b();
  no_bias.add_qkv_bias = false;
  expect_refused(kQwen25HalfB, no_bias,
                 "model_type \"qwen2\" has q, k and v biases, but model.add_qkv_bias is false");
  expect_refused(
      kLlama32OneB,
      [] {
        model::GptConfig biased = llama32_one_b();
        biased.add_qkv_bias = true;
        return biased;
      }(),
      "model_type \"llama\" has no q, k and v biases, but model.add_qkv_bias is true");
  // Switched on, the window is in layers 24.. (max_window_layers 24): none of the 24.
  const std::string switched_on =
      replaced(kQwen25HalfB, "\"use_sliding_window\": false", "\"use_sliding_window\": true");
  EXPECT_NO_THROW(check_hf_llama_config(switched_on, "config.json", qwen25_half_b()));
  expect_refused(replaced(switched_on, "\"max_window_layers\": 24", "\"max_window_layers\": 0"),
                 qwen25_half_b(),
                 "sliding_window (with use_sliding_window) 32768 differs from "
                 "model.sliding_window 0");
  expect_refused(replaced(switched_on, "\"max_window_layers\": 24", "\"max_window_layers\": 12"),
                 qwen25_half_b(),
                 "max_window_layers gives a sliding window to 12 of the 24 layers; the trainer's "
                 "window (model.sliding_window) is every layer's");
}

// Mistral NeMo 12B's shape: 32 heads of 128 (4096 wide) in a 5120-wide model.
const char* const kMistralNemo = R"({
  "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
  "hidden_size": 5120, "head_dim": 128, "intermediate_size": 14336, "num_hidden_layers": 40,
  "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 1024000,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "vocab_size": 131072, "torch_dtype": "bfloat16"})";

// `config` with a head of its own.
model::GptConfig untied(model::GptConfig config) {
  config.untie_embeddings = true;
  return config;
}

model::GptConfig mistral_nemo() {
  model::GptConfig config = untied(tied_llama(40, 5120, 32, 8, 14336, 131072, 1000000.f));
  config.kv_channels = 128;
  return config;
}

// model.kv_channels is config.json's head_dim, both ways; without one, transformers takes
// hidden_size / num_attention_heads, which must then be the model's head width.
TEST(HfLlamaConfig, TheMistralNemoConfigsHeadWidthIsKvChannels) {
  EXPECT_NO_THROW(check_hf_llama_config(kMistralNemo, "config.json", mistral_nemo()));
  const std::string exported = hf_llama_config_json(mistral_nemo());
  EXPECT_NE(exported.find("\"head_dim\": 128"), std::string::npos) << exported;
  EXPECT_NO_THROW(check_hf_llama_config(exported, "config.json", mistral_nemo()));
  model::GptConfig narrow = mistral_nemo();
  narrow.kv_channels = 0;
  expect_refused(kMistralNemo, narrow,
                 "head_dim 128 differs from model.hidden_size / model.num_attention_heads 160");
  expect_refused(replaced(kMistralNemo, "\"head_dim\": 128, ", ""), mistral_nemo(),
                 "head_dim is absent (hidden_size / num_attention_heads), but model.kv_channels "
                 "is 128");
}

// Qwen3-0.6B's config.json as published (transformers 4.51): Llama's block with q and k norms,
// heads of 128 (2048 wide) in a 1024-wide model, no biases, a tied head.
const char* const kQwen3ZeroSixB = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

model::GptConfig qwen3_zero_six_b() {
  model::GptConfig config = tied_llama(28, 1024, 16, 8, 3072, 151936, 1000000.f);
  config.kv_channels = 128;
  config.layernorm_epsilon = 1e-6f;
  config.qk_layernorm = true;
  return config;
}

// model.qk_layernorm is model_type qwen3, both ways; the export writes Qwen3ForCausalLM, which
// reads back; the model has the published parameter count.
TEST(HfLlamaConfig, TheQwen3ZeroSixBConfigIsAcceptedByItsModel) {
  EXPECT_NO_THROW(check_hf_llama_config(kQwen3ZeroSixB, "config.json", qwen3_zero_six_b()));
  const std::string exported = hf_llama_config_json(qwen3_zero_six_b());
  EXPECT_NE(exported.find("\"architectures\": [\n    \"Qwen3ForCausalLM\"\n  ]"), std::string::npos)
      << exported;
  EXPECT_NE(exported.find("\"model_type\": \"qwen3\""), std::string::npos) << exported;
  EXPECT_NE(exported.find("\"attention_bias\": false"), std::string::npos) << exported;
  EXPECT_NO_THROW(check_hf_llama_config(exported, "config.json", qwen3_zero_six_b()));
  model::GptConfig no_norms = qwen3_zero_six_b();
  no_norms.qk_layernorm = false;
  expect_refused(kQwen3ZeroSixB, no_norms,
                 "model_type \"qwen3\" has q and k norms, but model.qk_layernorm is false");
  expect_refused(replaced(kQwen3ZeroSixB, "\"model_type\": \"qwen3\"", "\"model_type\": \"llama\""),
                 qwen3_zero_six_b(),
                 "model_type \"llama\" has no q and k norms, but model.qk_layernorm is true");
  // use_sliding_window with a null window size slides nothing.
  EXPECT_NO_THROW(check_hf_llama_config(
      replaced(kQwen3ZeroSixB, "\"use_sliding_window\": false", "\"use_sliding_window\": true"),
      "config.json", qwen3_zero_six_b()));
  // 596,049,920: 28 layers of 15,730,944 and the tied 151936 x 1024 embeddings (0.6B published).
  EXPECT_EQ(model::GptParams::count(qwen3_zero_six_b()), 596049920);
  // Both q, k and v biases and q and k norms: no Hugging Face class holds that block.
  model::GptConfig both = qwen3_zero_six_b();
  both.add_qkv_bias = true;
  EXPECT_EQ(model::hf_family_mismatch(both),
            "model.qk_layernorm true with model.add_qkv_bias true");
}

// The model a config.json describes, against the expected one with seq_length `positions`: every
// field the export writes (shape, head width, RoPE, epsilon, tie, Qwen2's biases and Qwen3's
// norms through model_type) and kv_channels.
void expect_reads_as(const std::string& json, model::GptConfig expected, int64_t positions) {
  const model::GptConfig read = llama_config_from_hf_json(json, "config.json");
  expected.seq_length = positions;
  EXPECT_EQ(hf_llama_config_json(read), hf_llama_config_json(expected));
  EXPECT_EQ(read.kv_channels, expected.kv_channels);
  EXPECT_EQ(read.seq_length, positions);
}

// Each published config.json reads as the model its check accepts (transformers 5's
// rope_parameters too), and each export's config.json reads back as its model.
TEST(HfLlamaConfig, PublishedConfigsReadAsTheirModels) {
  expect_reads_as(kLlama32OneB, llama32_one_b(), 131072);
  const std::string v5 = replaced(
      replaced(replaced(kLlama32OneB, "\"rope_scaling\"", "\"rope_parameters\""),
               "\"rope_type\": \"llama3\"", "\"rope_type\": \"llama3\", \"rope_theta\": 500000.0"),
      "\"rope_theta\": 500000.0, \"tie", "\"tie");
  expect_reads_as(v5, llama32_one_b(), 131072);
  expect_reads_as(kQwen25HalfB, qwen25_half_b(), 32768);
  expect_reads_as(kMistralNemo, mistral_nemo(), 1024000);
  expect_reads_as(kQwen3ZeroSixB, qwen3_zero_six_b(), 40960);
  for (const model::GptConfig& config :
       {llama32_one_b(), qwen25_half_b(), mistral_nemo(), qwen3_zero_six_b()})
    expect_reads_as(hf_llama_config_json(config), config, config.positions());
}

TEST(HfLlamaConfig, WhatTheTrainerDoesNotReadIsNamed) {
  auto refused = [](const std::string& json, const std::string& expected) {
    try {
      llama_config_from_hf_json(json, "config.json");
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const runtime::InputError& error) {
      EXPECT_NE(std::string(error.what()).find("config.json: " + expected), std::string::npos)
          << error.what();
    }
  };
  refused(replaced(kQwen3ZeroSixB, "\"qwen3\"", "\"gemma\""),
          "\"model_type\" \"gemma\" is not a Llama-family model");
  refused(replaced(kQwen3ZeroSixB, "\"num_hidden_layers\": 28, ", ""),
          "\"num_hidden_layers\" is missing");
  refused(replaced(kQwen3ZeroSixB, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 3"),
          "\"num_key_value_heads\" 3 does not divide num_attention_heads 16");
  refused(replaced(kQwen3ZeroSixB, "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""),
          "hidden_act \"gelu\" is not silu");
  refused(replaced(kQwen3ZeroSixB, "\"hidden_size\": 1024", "\"hidden_size\": \"1024\""),
          "\"hidden_size\" must be a positive integer, got \"1024\"");
}

// Qwen's long-context setting, YaRN (rope_type "yarn" or, in older configs, "type"): read as
// model.rope_scaling.type yarn, checked both ways, written back by the export; its variants the
// trainer does not compute are refused, naming the field.
TEST(HfLlamaConfig, YarnScalingReadsChecksAndExports) {
  const std::string qwen3_yarn = replaced(kQwen3ZeroSixB, "\"rope_scaling\": null",
                                          R"("rope_scaling": {"type": "yarn", "factor": 4.0, )"
                                          R"("original_max_position_embeddings": 32768})");
  model::GptConfig yarn = qwen3_zero_six_b();
  yarn.rope_scaling = {.type = runtime::RopeScalingType::yarn,
                       .factor = 4.f,
                       .original_max_position_embeddings = 32768};
  expect_reads_as(qwen3_yarn, yarn, 40960);
  EXPECT_NO_THROW(check_hf_llama_config(qwen3_yarn, "config.json", yarn));
  const std::string exported = hf_llama_config_json(yarn);
  EXPECT_NE(exported.find("\"rope_type\": \"yarn\""), std::string::npos) << exported;
  expect_reads_as(exported, yarn, yarn.positions());
  expect_refused(qwen3_yarn, qwen3_zero_six_b(),
                 "rope_scaling is yarn, but model.rope_scaling.factor is 0 (plain RoPE)");
  model::GptConfig llama3 = yarn;
  llama3.rope_scaling.type = runtime::RopeScalingType::llama3;
  expect_refused(qwen3_yarn, llama3,
                 "rope_scaling.type \"yarn\", but model.rope_scaling.type is llama3");
  model::GptConfig fast = yarn;
  fast.rope_scaling.beta_fast = 16.f;
  expect_refused(qwen3_yarn, fast,
                 "rope_scaling.beta_fast absent (32) differs from model.rope_scaling.beta_fast 16");
  expect_refused(replaced(qwen3_yarn, "\"factor\": 4.0", "\"factor\": 4.0, \"mscale\": 0.707"),
                 yarn, "rope_scaling.mscale is set; the trainer takes YaRN's default");
}

// Mistral-7B-v0.1's config.json as published (transformers 4.34): Llama's block with a sliding
// window of 4096 positions in every layer, 32 heads in 8 kv groups, an untied head.
const char* const kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

model::GptConfig mistral_7b() {
  model::GptConfig config = untied(tied_llama(32, 4096, 32, 8, 14336, 32000, 10000.f));
  config.sliding_window = 4096;
  return config;
}

// The model configs/mistral_7b_8gpu.yaml trains: its config.json is accepted, the model has the
// published parameter count, and the export writes MistralForCausalLM back.
TEST(HfLlamaConfig, TheMistral7BConfigIsAcceptedByItsModel) {
  EXPECT_NO_THROW(check_hf_llama_config(kMistral7B, "config.json", mistral_7b()));
  // 7,241,732,096: 32 layers of 218,112,000, the embeddings and the head (32000 x 4096 each)
  // and the final norm.
  EXPECT_EQ(model::GptParams::count(mistral_7b()), 7241732096);
  const model::GptConfig read = llama_config_from_hf_json(kMistral7B, "config.json");
  EXPECT_EQ(read.sliding_window, 4096);
  EXPECT_EQ(model::GptParams::count(read), 7241732096);
  EXPECT_EQ(model::hf_class_name(read), "MistralForCausalLM");
  EXPECT_NO_THROW(
      check_hf_llama_config(hf_llama_config_json(mistral_7b()), "config.json", mistral_7b()));
}

// model.sliding_window the Hugging Face way (Note [Sliding window]): MistralConfig's
// sliding_window (4096 when absent, none when null), Qwen's under use_sliding_window in the
// layers from max_window_layers on (or those layer_types names), none in LlamaConfig; the
// export writes MistralForCausalLM, or Qwen's switch from layer 0, and reads back.
TEST(HfLlamaConfig, SlidingWindowsReadAndExportTheHuggingFaceWay) {
  model::GptConfig nemo_window = mistral_nemo();
  nemo_window.sliding_window = 4096;
  expect_refused(kMistralNemo, nemo_window,
                 "sliding_window none differs from model.sliding_window 4096");
  const std::string absent = replaced(kMistralNemo, "\"sliding_window\": null,", "");
  EXPECT_NO_THROW(check_hf_llama_config(absent, "config.json", nemo_window));
  EXPECT_EQ(llama_config_from_hf_json(absent, "config.json").sliding_window, 4096);
  const std::string w64 =
      replaced(kMistralNemo, "\"sliding_window\": null", "\"sliding_window\": 64");
  EXPECT_EQ(llama_config_from_hf_json(w64, "config.json").sliding_window, 64);
  expect_refused(w64, nemo_window, "sliding_window 64 differs from model.sliding_window 4096");
  expect_refused(replaced(kMistralNemo, "\"sliding_window\": null", "\"sliding_window\": 0"),
                 nemo_window, "sliding_window 0 is not a positive integer");
  expect_refused(
      replaced(kLlama32OneB, "\"vocab_size\"", "\"sliding_window\": 64, \"vocab_size\""),
      llama32_one_b(),
      "sliding_window is set, but LlamaForCausalLM has no sliding window (use model_type "
      "mistral)");

  // The export: MistralForCausalLM without the bias switches, and it reads back.
  const std::string exported = hf_llama_config_json(nemo_window);
  EXPECT_NE(exported.find("\"architectures\": [\n    \"MistralForCausalLM\"\n  ]"),
            std::string::npos)
      << exported;
  EXPECT_NE(exported.find("\"model_type\": \"mistral\""), std::string::npos) << exported;
  EXPECT_NE(exported.find("\"sliding_window\": 4096"), std::string::npos) << exported;
  EXPECT_EQ(exported.find("attention_bias"), std::string::npos) << exported;
  EXPECT_NO_THROW(check_hf_llama_config(exported, "config.json", nemo_window));
  expect_refused(exported, mistral_nemo(),
                 "sliding_window 4096 differs from model.sliding_window 0");
  EXPECT_EQ(llama_config_from_hf_json(exported, "config.json").sliding_window, 4096);
  EXPECT_EQ(model::hf_family_mismatch(nemo_window), "");
  model::GptConfig scaled = nemo_window;
  scaled.rope_scaling.factor = 8.f;
  EXPECT_EQ(model::hf_family_mismatch(scaled).rfind("model.rope_scaling.factor 8", 0), 0u)
      << model::hf_family_mismatch(scaled);
  model::GptConfig gpt2;
  gpt2.sliding_window = 16;
  EXPECT_EQ(model::hf_family_mismatch(gpt2), "model.sliding_window 16");

  // Qwen3 with a window in every layer: use_sliding_window, max_window_layers 0.
  model::GptConfig qwen_window = qwen3_zero_six_b();
  qwen_window.sliding_window = 4096;
  const std::string qwen_exported = hf_llama_config_json(qwen_window);
  EXPECT_NE(qwen_exported.find("\"use_sliding_window\": true"), std::string::npos) << qwen_exported;
  EXPECT_NE(qwen_exported.find("\"max_window_layers\": 0"), std::string::npos) << qwen_exported;
  EXPECT_NO_THROW(check_hf_llama_config(qwen_exported, "config.json", qwen_window));
  EXPECT_EQ(llama_config_from_hf_json(qwen_exported, "config.json").sliding_window, 4096);
  const std::string every_layer = replaced(
      replaced(
          replaced(kQwen3ZeroSixB, "\"use_sliding_window\": false", "\"use_sliding_window\": true"),
          "\"sliding_window\": null", "\"sliding_window\": 4096"),
      "\"max_window_layers\": 28", "\"max_window_layers\": 0");
  EXPECT_NO_THROW(check_hf_llama_config(every_layer, "config.json", qwen_window));
  std::string types = "[";
  for (int layer = 0; layer < 28; ++layer)
    types += std::string(layer > 0 ? ", " : "") +
             (layer % 2 == 0 ? "\"sliding_attention\"" : "\"full_attention\"");
  expect_refused(
      replaced(every_layer, "\"vocab_size\"", "\"layer_types\": " + types + "], \"vocab_size\""),
      qwen_window,
      "layer_types gives a sliding window to 14 of the 28 layers; the trainer's window "
      "(model.sliding_window) is every layer's");
  // Without a window the exports are those of before: no max_window_layers, no window size.
  EXPECT_EQ(hf_llama_config_json(qwen3_zero_six_b()).find("max_window_layers"), std::string::npos);
}

}  // namespace
}  // namespace trainer
