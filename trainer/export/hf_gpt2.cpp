// HF GPT-2 export/import: layout permutations (Conv1D [in, out] transposes, per-head QKV rows to
// q | k | v columns), dtype widening on import, and config.json both ways. Import validates every
// tensor against the config before writing any parameter it touches; errors are InputError.
#include "trainer/export/hf_gpt2.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "runtime/error.h"
#include "trainer/export/json_object.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {
namespace {

using runtime::InputError;
using Shape = std::vector<int64_t>;

constexpr std::string_view kPrefix = "transformer.";

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The params must be host f32 views laid out for `config` (a caller bug otherwise).
void check_layout(const model::GptParams& params, const model::GptConfig& config) {
  TRAINER_ASSERT(params.flat.defined() && params.flat.device() == runtime::DeviceKind::cpu &&
                     params.flat.dtype() == runtime::DType::f32,
                 "HF GPT-2 conversion needs host f32 parameters");
  TRAINER_ASSERT(params.flat.numel() == model::GptParams::count(config) &&
                     params.wte.shape() == Shape({config.padded_vocab(), config.hidden_size}) &&
                     params.wpe.shape() == Shape({config.positions(), config.hidden_size}) &&
                     static_cast<int64_t>(params.layers.size()) == config.num_layers,
                 "parameters are not allocated for this config");
  TRAINER_ASSERT(config.hidden_size % config.num_attention_heads == 0,
                 "hidden_size " << config.hidden_size << " % heads " << config.num_attention_heads);
}

// Note [QKV layout]: the model's fused QKV row (h*3 + which)*D + d (which: q=0, k=1, v=2) is HF
// c_attn column which*C + h*D + d, so that HF's split(C) yields q, k, v of all heads in order.
int64_t hf_qkv_column(int64_t model_row, const model::GptConfig& config) {
  const int64_t D = config.head_dim(), C = config.hidden_size;
  const int64_t head = model_row / (3 * D), which = model_row / D % 3, d = model_row % D;
  return which * C + head * D + d;
}

// (rows, cols) row-major -> (cols, rows) row-major.
std::vector<float> transposed(const float* source, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = source[r * cols + c];
  return out;
}

using Transform = HfTransform;

const std::vector<HfRule>& hf_gpt2_rules() {
  static const std::vector<HfRule> rules = {
      {"embedding.word_embeddings.weight", "wte.weight", Transform::vocab_rows},
      {"embedding.position_embeddings.weight", "wpe.weight", Transform::copy},
      {"layers.{i}.input_layernorm.weight", "h.{i}.ln_1.weight", Transform::copy},
      {"layers.{i}.input_layernorm.bias", "h.{i}.ln_1.bias", Transform::copy},
      {"layers.{i}.self_attention.linear_qkv.weight", "h.{i}.attn.c_attn.weight",
       Transform::qkv_columns},
      {"layers.{i}.self_attention.linear_qkv.bias", "h.{i}.attn.c_attn.bias",
       Transform::qkv_columns},
      {"layers.{i}.self_attention.linear_proj.weight", "h.{i}.attn.c_proj.weight",
       Transform::transpose},
      {"layers.{i}.self_attention.linear_proj.bias", "h.{i}.attn.c_proj.bias", Transform::copy},
      {"layers.{i}.pre_mlp_layernorm.weight", "h.{i}.ln_2.weight", Transform::copy},
      {"layers.{i}.pre_mlp_layernorm.bias", "h.{i}.ln_2.bias", Transform::copy},
      {"layers.{i}.mlp.linear_fc1.weight", "h.{i}.mlp.c_fc.weight", Transform::transpose},
      {"layers.{i}.mlp.linear_fc1.bias", "h.{i}.mlp.c_fc.bias", Transform::copy},
      {"layers.{i}.mlp.linear_fc2.weight", "h.{i}.mlp.c_proj.weight", Transform::transpose},
      {"layers.{i}.mlp.linear_fc2.bias", "h.{i}.mlp.c_proj.bias", Transform::copy},
      {"final_layernorm.weight", "ln_f.weight", Transform::copy},
      {"final_layernorm.bias", "ln_f.bias", Transform::copy},
  };
  return rules;
}

}  // namespace

std::vector<HfSource> hf_gpt2_sources(const model::GptParams& layout,
                                      const model::GptConfig& config) {
  TRAINER_ASSERT(layout.flat.numel() == model::GptParams::count(config) &&
                     static_cast<int64_t>(layout.layers.size()) == config.num_layers,
                 "HF GPT-2 export needs the whole model's layout");
  TRAINER_ASSERT(config.hidden_size % config.num_attention_heads == 0,
                 "hidden_size " << config.hidden_size << " % heads " << config.num_attention_heads);
  const int64_t C = config.hidden_size;
  std::vector<HfSource> sources;
  for (size_t index = 0; index < layout.named.size(); ++index) {
    const model::NamedParam& p = layout.named[index];
    const auto [rule, layer] = hf_rule_of(hf_gpt2_rules(), p.name);
    TRAINER_ASSERT(rule != nullptr, "no HF GPT-2 rule for " << p.name);
    const std::string hf = std::string(kPrefix) + hf_replaced(rule->hf, "{i}", layer);
    const auto param = static_cast<int64_t>(index);
    const Shape& shape = p.global_shape;
    // HF's Conv1D keeps [in, out] where the model keeps (out, in); a bias is the same.
    const Shape reversed(shape.rbegin(), shape.rend());
    // A tensor made by `make` (a permuted copy of the values), given to the sink whole.
    auto made = [](std::function<std::vector<float>(const float*)> make) {
      return [make = std::move(make)](const float* values, const HfValueSink& sink) {
        const std::vector<float> out = make(values);
        sink(out.data(), static_cast<int64_t>(out.size()));
      };
    };
    switch (rule->transform) {
      case Transform::copy:
      case Transform::vocab_rows:
        sources.push_back(hf_shared_source(rule->transform, hf, shape, param, config.vocab_size));
        break;
      case Transform::transpose: {  // the model's (rows, cols) as HF's [cols, rows]
        const int64_t rows = shape[0], cols = shape[1];
        sources.push_back({hf, reversed, param, made([rows, cols](const float* values) {
                             return transposed(values, rows, cols);
                           })});
        break;
      }
      case Transform::qkv_columns: {
        // c_attn [in C, out 3C] and its bias [3C] (one input): the model's row r of (3C, in) is
        // HF's column hf_qkv_column(r).
        const int64_t in = runtime::shape_numel(shape) / (3 * C);
        sources.push_back({hf, reversed, param, made([config, C, in](const float* values) {
                             std::vector<float> out(static_cast<size_t>(3 * C * in));
                             for (int64_t row = 0; row < 3 * C; ++row) {
                               const int64_t column = hf_qkv_column(row, config);
                               for (int64_t i = 0; i < in; ++i)
                                 out[static_cast<size_t>(i * 3 * C + column)] =
                                     values[row * in + i];
                             }
                             return out;
                           })});
        break;
      }
      case Transform::split_qkv:
        TRAINER_ASSERT(false, "Llama's transform in the GPT-2 table: " << rule->ours);
    }
  }
  return sources;
}

HfGpt2Import::HfGpt2Import(SafetensorsFile file, const model::GptConfig& config)
    : HfImport(std::move(file), config, {std::string(kPrefix), ""}, hf_gpt2_rules()) {
  TRAINER_ASSERT(config.hidden_size % config.num_attention_heads == 0,
                 "hidden_size " << config.hidden_size << " % heads " << config.num_attention_heads);
  check_tensors([](const std::string& name) {  // what HF ties or recomputes
    return name == "lm_head.weight" || ends_with(name, ".attn.bias") ||
           ends_with(name, ".attn.masked_bias");
  });
}

void HfGpt2Import::check_transformed(const HfRule&, const std::string& hf,
                                     const runtime::Shape& shape) {
  // transpose and qkv_columns: HF keeps [in, out], the model (out, in); a bias is the same.
  tensors_.check(hf, Shape(shape.rbegin(), shape.rend()));
}

std::vector<float> HfGpt2Import::transformed(const HfRule& rule, const std::string& hf,
                                             const runtime::Shape& shape, const HfBlock& block) {
  // HF's [in, out]: the block's columns are the file's rows, read alone.
  if (rule.transform == Transform::transpose) {
    const std::vector<float> source =
        tensors_.values(hf, {block.first_col, block.cols, block.first_row, block.rows});
    return transposed(source.data(), block.cols, block.rows);
  }
  // qkv_columns: row r is HF's column hf_qkv_column(r), read with every column of the file's rows
  // (the block's columns; a bias is one row).
  TRAINER_ASSERT(rule.transform == Transform::qkv_columns, "not a GPT-2 transform: " << rule.ours);
  const int64_t hf_cols = shape[0];
  const std::vector<float> source =
      shape.size() > 1 ? tensors_.values(hf, {block.first_col, block.cols}) : tensors_.values(hf);
  std::vector<float> out(static_cast<size_t>(block.rows * block.cols));
  for (int64_t row = 0; row < block.rows; ++row) {
    const int64_t column = hf_qkv_column(block.first_row + row, config_);
    for (int64_t in = 0; in < block.cols; ++in)
      out[static_cast<size_t>(row * block.cols + in)] =
          source[static_cast<size_t>(in * hf_cols + column)];
  }
  return out;
}

void from_hf_gpt2(const SafetensorsFile& file, const model::GptParams& params,
                  const model::GptConfig& config) {
  check_layout(params, config);
  HfGpt2Import import(file, config);
  import_whole(import, params);
}

std::string hf_gpt2_config_json(const model::GptConfig& config, std::string_view torch_dtype) {
  const int64_t C = config.hidden_size;
  const std::string activation =
      config.activation == model::Activation::gelu_tanh ? "gelu_new" : "gelu";
  std::vector<std::pair<std::string, std::string>> fields = {
      {"activation_function", json_quote(activation)},
      {"architectures", "[\n    " + json_quote("GPT2LMHeadModel") + "\n  ]"},
      {"attn_pdrop", json_number(config.attention_dropout)},
      {"embd_pdrop", json_number(config.hidden_dropout)},
      {"initializer_range", json_number(config.init_method_std)},
      {"layer_norm_epsilon", json_number(config.layernorm_epsilon)},
      {"model_type", json_quote("gpt2")},
      {"n_ctx", std::to_string(config.positions())},
      {"n_embd", std::to_string(C)},
      {"n_head", std::to_string(config.num_attention_heads)},
      {"n_inner", config.ffn() == 4 * C ? "null" : std::to_string(config.ffn())},
      {"n_layer", std::to_string(config.num_layers)},
      {"n_positions", std::to_string(config.positions())},
      {"resid_pdrop", json_number(config.hidden_dropout)},
      {"tie_word_embeddings", "true"},
      {"torch_dtype", json_quote(torch_dtype)},
      {"vocab_size", std::to_string(config.vocab_size)},
  };
  std::sort(fields.begin(), fields.end());  // HF writes sort_keys=True
  std::string json = "{\n";
  for (size_t i = 0; i < fields.size(); ++i)
    json += "  " + json_quote(fields[i].first) + ": " + fields[i].second +
            (i + 1 < fields.size() ? ",\n" : "\n");
  return json + "}\n";
}

model::GptConfig gpt_config_from_hf_json(const std::string& json_text, const std::string& source) {
  const JsonConfigReader json(json_text, source);
  if (json.string("model_type", "gpt2") != "gpt2")
    json.fail("model_type", "is \"" + json.string("model_type", "") + "\", expected \"gpt2\"");
  model::GptConfig config;
  config.num_layers = json.positive_integer("n_layer");
  config.hidden_size = json.positive_integer("n_embd");
  config.num_attention_heads = json.positive_integer("n_head");
  config.vocab_size = json.positive_integer("vocab_size");
  config.max_position_embeddings = json.positive_integer("n_positions");
  config.seq_length = config.max_position_embeddings;
  config.ffn_hidden_size = json.optional_positive_integer("n_inner", 0);
  if (config.hidden_size % config.num_attention_heads != 0)
    json.fail("n_embd", TRAINER_STR("= " << config.hidden_size << " is not divisible by n_head = "
                                         << config.num_attention_heads));

  const std::string activation = json.string("activation_function", "gelu_new");
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    config.activation = model::Activation::gelu_tanh;
  } else if (activation == "gelu") {
    config.activation = model::Activation::gelu;
  } else {
    json.fail("activation_function",
              "= \"" + activation + "\" is not supported (gelu_new, gelu_pytorch_tanh, gelu)");
  }

  const float resid_pdrop = json.number("resid_pdrop", 0.1f);
  const float embd_pdrop = json.number("embd_pdrop", 0.1f);
  if (resid_pdrop != embd_pdrop)
    json.fail("embd_pdrop",
              TRAINER_STR("= " << embd_pdrop << " differs from resid_pdrop = " << resid_pdrop
                               << "; the model has one hidden_dropout"));
  config.hidden_dropout = resid_pdrop;
  config.attention_dropout = json.number("attn_pdrop", 0.1f);
  const std::pair<const char*, float> dropouts[] = {{"resid_pdrop", resid_pdrop},
                                                    {"attn_pdrop", config.attention_dropout}};
  for (const auto& [field, value] : dropouts)
    if (!(value >= 0.f && value < 1.f))
      json.fail(field, TRAINER_STR("= " << value << " is not in [0, 1)"));
  config.layernorm_epsilon = json.number("layer_norm_epsilon", 1e-5f);
  if (!(config.layernorm_epsilon > 0.f))
    json.fail("layer_norm_epsilon",
              TRAINER_STR("= " << config.layernorm_epsilon << " must be > 0"));
  config.init_method_std = json.number("initializer_range", 0.02f);
  if (!(config.init_method_std > 0.f))
    json.fail("initializer_range", TRAINER_STR("= " << config.init_method_std << " must be > 0"));

  // Variants of GPT-2 this model does not compute.
  if (!json.boolean("tie_word_embeddings", true))
    json.fail("tie_word_embeddings", "= false: the model ties lm_head to wte");
  if (!json.boolean("scale_attn_weights", true))
    json.fail("scale_attn_weights", "= false: the model always scales scores by 1/sqrt(head_dim)");
  if (json.boolean("scale_attn_by_inverse_layer_idx", false))
    json.fail("scale_attn_by_inverse_layer_idx", "= true is not supported");
  return config;
}

}  // namespace trainer
