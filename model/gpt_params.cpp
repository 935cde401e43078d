// Parameter layout (one flat buffer, named views) and the deterministic init.
#include "model/gpt_params.h"

#include <cmath>

#include "runtime/ops.h"
#include "runtime/philox.h"

namespace model {
namespace {

// One parameter as the shard holds it: name, global shape, split dimension, its piece and
// roles, and the view it fills (a member of GptParams, or of its layer's LayerParams). A spec
// that `extends` the view of the spec before it widens that view over both (SwiGLU's up after
// its gate: one fc1 matrix).
struct ParamSpec {
  std::string name;
  runtime::Shape global_shape;
  int shard_dim;  // -1: replicated over tensor parallelism
  bool sequence_parallel_partial;
  bool tensor_parallel_partial;
  ParamPiece piece;
  int64_t layer_index;  // into GptParams::layers; -1 outside layers
  ParamRoles roles;
  Tensor GptParams::*model_view;    // set outside layers
  Tensor LayerParams::*layer_view;  // set in layers
  bool extends = false;
};

// Every parameter of `shard`, in flat-buffer order: each piece's parameters back to back.
std::vector<ParamSpec> param_specs(const GptConfig& config, const ModelShard& shard) {
  const int64_t C = config.hidden_size, F = config.ffn(), Q = config.qkv_rows();
  const bool bias = config.add_bias_linear;
  const bool layernorm = config.normalization == Normalization::layernorm;
  std::vector<ParamSpec> specs;
  struct Options {
    bool partial = false;
    bool tp_partial = false;
    ParamRoles roles = {};
    bool extends = false;
  };
  auto add_model = [&](std::string name, runtime::Shape shape, int shard_dim, ParamPiece piece,
                       Tensor GptParams::*view, Options options = {}) {
    specs.push_back({std::move(name), std::move(shape), shard_dim, options.partial,
                     options.tp_partial, piece, -1, options.roles, view, nullptr});
  };
  const ParamRoles vocab{.tied = !config.untie_embeddings, .vocab_padded = true};
  if (shard.has_word_embeddings(config)) {
    add_model("embedding.word_embeddings.weight", {config.padded_vocab(shard.tp_size), C}, 0,
              ParamPiece::word_embeddings, &GptParams::wte, {.roles = vocab});
  }
  if (shard.embedding && config.learned_positions()) {
    add_model("embedding.position_embeddings.weight", {config.positions(), C}, -1,
              ParamPiece::position_embeddings, &GptParams::wpe, {.partial = true});
  }
  for (size_t local = 0; local < shard.layers.size(); ++local) {
    const std::string p = "layers." + std::to_string(shard.layers[local]) + ".";
    auto add = [&](const char* name, runtime::Shape shape, int shard_dim, Tensor LayerParams::*view,
                   Options options = {}) {
      specs.push_back({p + name, std::move(shape), shard_dim, options.partial, options.tp_partial,
                       ParamPiece::layer, static_cast<int64_t>(local), options.roles, nullptr, view,
                       options.extends});
    };
    const Options norm_weight{.partial = true, .roles = {.norm = true}}, norm_bias{.partial = true};
    const Options output{.roles = {.output_projection = true}}, up{.extends = true};
    add("input_layernorm.weight", {C}, -1, &LayerParams::ln1_weight, norm_weight);
    if (layernorm) add("input_layernorm.bias", {C}, -1, &LayerParams::ln1_bias, norm_bias);
    add("self_attention.linear_qkv.weight", {Q, C}, 0, &LayerParams::qkv_weight);
    if (config.qkv_bias()) add("self_attention.linear_qkv.bias", {Q}, 0, &LayerParams::qkv_bias);
    if (config.qk_layernorm) {
      const Options head_norm{.tp_partial = true, .roles = {.norm = true}};
      const int64_t D = config.head_dim();
      add("self_attention.q_layernorm.weight", {D}, -1, &LayerParams::q_norm_weight, head_norm);
      add("self_attention.k_layernorm.weight", {D}, -1, &LayerParams::k_norm_weight, head_norm);
    }
    add("self_attention.linear_proj.weight", {C, config.attention_width()}, 1,
        &LayerParams::proj_weight, output);
    if (bias) add("self_attention.linear_proj.bias", {C}, -1, &LayerParams::proj_bias);
    add("pre_mlp_layernorm.weight", {C}, -1, &LayerParams::ln2_weight, norm_weight);
    if (layernorm) add("pre_mlp_layernorm.bias", {C}, -1, &LayerParams::ln2_bias, norm_bias);
    if (config.swiglu()) {
      add("mlp.linear_fc1_gate.weight", {F, C}, 0, &LayerParams::fc1_weight);
      add("mlp.linear_fc1_up.weight", {F, C}, 0, &LayerParams::fc1_weight, up);
      if (bias) {
        add("mlp.linear_fc1_gate.bias", {F}, 0, &LayerParams::fc1_bias);
        add("mlp.linear_fc1_up.bias", {F}, 0, &LayerParams::fc1_bias, up);
      }
    } else {
      add("mlp.linear_fc1.weight", {F, C}, 0, &LayerParams::fc1_weight);
      if (bias) add("mlp.linear_fc1.bias", {F}, 0, &LayerParams::fc1_bias);
    }
    add("mlp.linear_fc2.weight", {C, F}, 1, &LayerParams::fc2_weight, output);
    if (bias) add("mlp.linear_fc2.bias", {C}, -1, &LayerParams::fc2_bias);
  }
  if (shard.head) {
    add_model("final_layernorm.weight", {C}, -1, ParamPiece::final_norm, &GptParams::lnf_weight,
              {.partial = true, .roles = {.norm = true}});
    if (layernorm) {
      add_model("final_layernorm.bias", {C}, -1, ParamPiece::final_norm, &GptParams::lnf_bias,
                {.partial = true});
    }
    if (config.untie_embeddings) {
      add_model("output_layer.weight", {config.padded_vocab(shard.tp_size), C}, 0,
                ParamPiece::output_layer, &GptParams::output_weight, {.roles = vocab});
    }
  }
  return specs;
}

runtime::Shape local_shape(const ParamSpec& spec, const ModelShard& shard) {
  runtime::Shape shape = spec.global_shape;
  if (spec.shard_dim >= 0) shape[static_cast<size_t>(spec.shard_dim)] /= shard.tp_size;
  return shape;
}

// FNV-1a: a tensor's init stream is keyed by its name, not its position, so a
// pipeline stage holding a subset of the layers draws the same values.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

ModelShard ModelShard::whole(const GptConfig& config) {
  ModelShard shard;
  for (int64_t i = 0; i < config.num_layers; ++i) shard.layers.push_back(i);
  return shard;
}

int64_t GptParams::count(const GptConfig& config, const ModelShard& shard) {
  int64_t total = 0;
  for (const ParamSpec& spec : param_specs(config, shard))
    total += runtime::shape_numel(local_shape(spec, shard));
  return total;
}

GptParams GptParams::allocate(runtime::Allocator& allocator, const GptConfig& config,
                              const ModelShard& shard, runtime::MemoryCategory category,
                              runtime::DType dtype) {
  GptParams p;
  p.flat = Tensor::empty(allocator, {count(config, shard)}, dtype, category);
  int64_t offset = 0;
  p.layers.resize(shard.layers.size());
  for (const ParamSpec& spec : param_specs(config, shard)) {
    const runtime::Shape shape = local_shape(spec, shard);
    NamedParam named{.name = spec.name,
                     .tensor = p.flat.view(offset, shape),
                     .global_shape = spec.global_shape,
                     .shard_dim = spec.shard_dim,
                     .weight_decay = spec.global_shape.size() >= 2,
                     .sequence_parallel_partial = spec.sequence_parallel_partial,
                     .tensor_parallel_partial = spec.tensor_parallel_partial,
                     .piece = spec.piece,
                     .layer_index = spec.layer_index,
                     .roles = spec.roles};
    if (spec.shard_dim >= 0)
      named.shard_offset = shard.tp_rank * shape[static_cast<size_t>(spec.shard_dim)];
    Tensor& view = spec.layer_view != nullptr
                       ? p.layers[static_cast<size_t>(spec.layer_index)].*spec.layer_view
                       : p.*spec.model_view;
    if (spec.extends) {  // the view of the spec before, widened over this one too
      runtime::Shape both = shape;
      both[0] += view.dim(0);
      view = p.flat.view(offset - view.numel(), both);
    } else {
      view = named.tensor;
    }
    p.named.push_back(std::move(named));
    offset += runtime::shape_numel(shape);
  }
  return p;
}

const NamedParam* GptParams::find(const std::string& name) const {
  for (const NamedParam& p : named)
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

// The init of one parameter: layernorm weights 1, biases 0, weights normal (Note [Parameter
// init RNG]) with the scaled std of the output projections, padded vocabulary rows 0.
runtime::ParamInit param_init(const NamedParam& p, const GptConfig& config, uint64_t seed) {
  runtime::ParamInit init;
  init.rows = p.tensor.numel();
  init.cols = 1;
  if (p.roles.norm) {
    init.fill = 1.f;
    return init;
  }
  if (!p.weight_decay) return init;  // biases: 0
  const float std_dev = config.init_method_std;
  const float output_std = std_dev / std::sqrt(2.0f * static_cast<float>(config.num_layers));
  init.normal = true;
  init.std_dev = p.roles.output_projection ? output_std : std_dev;
  init.seed = seed;
  init.tensor_id = name_hash(p.name);
  // Local (row, col) -> index in the unsharded (rows, global_cols) tensor.
  init.rows = p.tensor.dim(0);
  init.cols = p.tensor.dim(1);
  init.global_cols = p.global_shape[1];
  init.row_offset = p.shard_dim == 0 ? p.shard_offset : 0;
  init.col_offset = p.shard_dim == 1 ? p.shard_offset : 0;
  // Padded vocabulary rows never see a token or a gradient; keep them zero.
  if (p.roles.vocab_padded) init.zero_rows_from = config.vocab_size;
  return init;
}

}  // namespace

void init_params(const GptParams& params, const GptConfig& config, uint64_t seed) {
  for (const NamedParam& p : params.named)
    runtime::ops::init_param({.out = p.tensor, .init = param_init(p, config, seed)});
}

}  // namespace model
