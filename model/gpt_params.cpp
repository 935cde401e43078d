// Parameter layout (one flat buffer, named views) and the deterministic init.
#include "model/gpt_params.h"

#include <cmath>

#include "runtime/ops.h"
#include "runtime/philox.h"

namespace model {
namespace {

// One parameter as the shard holds it: name, global shape and split dimension.
struct ParamSpec {
  std::string name;
  runtime::Shape global_shape;
  int shard_dim;  // -1: replicated over tensor parallelism
  bool sequence_parallel_partial;
};

// Every parameter of `shard`, in flat-buffer order.
std::vector<ParamSpec> param_specs(const GptConfig& config, const ModelShard& shard) {
  const int64_t C = config.hidden_size, F = config.ffn();
  std::vector<ParamSpec> specs;
  auto add = [&](std::string name, runtime::Shape shape, int shard_dim, bool partial = false) {
    specs.push_back({std::move(name), std::move(shape), shard_dim, partial});
  };
  if (shard.has_word_embeddings()) {
    add(kWordEmbeddingsName, {config.padded_vocab(shard.tp_size), C}, 0);
  }
  if (shard.embedding)
    add("embedding.position_embeddings.weight", {config.positions(), C}, -1, true);
  for (int64_t i : shard.layers) {
    const std::string p = "layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {C}, -1, true);
    add(p + "input_layernorm.bias", {C}, -1, true);
    add(p + "self_attention.linear_qkv.weight", {3 * C, C}, 0);
    add(p + "self_attention.linear_qkv.bias", {3 * C}, 0);
    add(p + "self_attention.linear_proj.weight", {C, C}, 1);
    add(p + "self_attention.linear_proj.bias", {C}, -1);
    add(p + "pre_mlp_layernorm.weight", {C}, -1, true);
    add(p + "pre_mlp_layernorm.bias", {C}, -1, true);
    add(p + "mlp.linear_fc1.weight", {F, C}, 0);
    add(p + "mlp.linear_fc1.bias", {F}, 0);
    add(p + "mlp.linear_fc2.weight", {C, F}, 1);
    add(p + "mlp.linear_fc2.bias", {C}, -1);
  }
  if (shard.head) {
    add("final_layernorm.weight", {C}, -1, true);
    add("final_layernorm.bias", {C}, -1, true);
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

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ModelShard ModelShard::whole(const GptConfig& config) {
  ModelShard shard;
  for (int64_t i = 0; i < config.num_layers; ++i) shard.layers.push_back(i);
  return shard;
}

std::vector<std::string> whole_model_param_names(const GptConfig& config) {
  std::vector<std::string> names;
  for (const ParamSpec& spec : param_specs(config, ModelShard::whole(config)))
    names.push_back(spec.name);
  return names;
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
  for (const ParamSpec& spec : param_specs(config, shard)) {
    const runtime::Shape shape = local_shape(spec, shard);
    NamedParam named{spec.name,
                     p.flat.view(offset, shape),
                     spec.global_shape,
                     spec.shard_dim,
                     0,
                     spec.global_shape.size() >= 2,
                     spec.sequence_parallel_partial};
    if (spec.shard_dim >= 0)
      named.shard_offset = shard.tp_rank * shape[static_cast<size_t>(spec.shard_dim)];
    p.named.push_back(std::move(named));
    offset += runtime::shape_numel(shape);
  }
  size_t next = 0;
  auto take = [&]() { return p.named[next++].tensor; };
  if (shard.has_word_embeddings()) p.wte = take();
  if (shard.embedding) p.wpe = take();
  p.layers.resize(shard.layers.size());
  for (LayerParams& l : p.layers) {
    l.ln1_weight = take(), l.ln1_bias = take();
    l.qkv_weight = take(), l.qkv_bias = take();
    l.proj_weight = take(), l.proj_bias = take();
    l.ln2_weight = take(), l.ln2_bias = take();
    l.fc1_weight = take(), l.fc1_bias = take();
    l.fc2_weight = take(), l.fc2_bias = take();
  }
  if (shard.head) p.lnf_weight = take(), p.lnf_bias = take();
  TRAINER_ASSERT(next == p.named.size(), "parameter layout mismatch");
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
  if (ends_with(p.name, "layernorm.weight")) {
    init.fill = 1.f;
    return init;
  }
  if (!p.weight_decay) return init;  // biases: 0
  const float std_dev = config.init_method_std;
  const float output_std = std_dev / std::sqrt(2.0f * static_cast<float>(config.num_layers));
  const bool output =
      ends_with(p.name, "linear_proj.weight") || ends_with(p.name, "linear_fc2.weight");
  init.normal = true;
  init.std_dev = output ? output_std : std_dev;
  init.seed = seed;
  init.tensor_id = name_hash(p.name);
  // Local (row, col) -> index in the unsharded (rows, global_cols) tensor.
  init.rows = p.tensor.dim(0);
  init.cols = p.tensor.dim(1);
  init.global_cols = p.global_shape[1];
  init.row_offset = p.shard_dim == 0 ? p.shard_offset : 0;
  init.col_offset = p.shard_dim == 1 ? p.shard_offset : 0;
  // Padded vocabulary rows never see a token or a gradient; keep them zero.
  if (p.name == kWordEmbeddingsName) init.zero_rows_from = config.vocab_size;
  return init;
}

}  // namespace

void init_params(const GptParams& params, const GptConfig& config, uint64_t seed) {
  for (const NamedParam& p : params.named)
    runtime::ops::init_param({.out = p.tensor, .init = param_init(p, config, seed)});
}

}  // namespace model
