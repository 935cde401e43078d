// Parameter layout (one flat buffer, named views) and the deterministic init.
#include "model/gpt_params.h"

#include <cmath>

#include "runtime/philox.h"

namespace model {
namespace {

// Calls visit(name, shape, decay) for every parameter in flat-buffer order.
template <typename Visit>
void for_each_param(const GptConfig& config, Visit&& visit) {
  const int64_t C = config.hidden_size, F = config.ffn();
  visit("embedding.word_embeddings.weight", runtime::Shape{config.padded_vocab(), C});
  visit("embedding.position_embeddings.weight", runtime::Shape{config.positions(), C});
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    visit(p + "input_layernorm.weight", runtime::Shape{C});
    visit(p + "input_layernorm.bias", runtime::Shape{C});
    visit(p + "self_attention.linear_qkv.weight", runtime::Shape{3 * C, C});
    visit(p + "self_attention.linear_qkv.bias", runtime::Shape{3 * C});
    visit(p + "self_attention.linear_proj.weight", runtime::Shape{C, C});
    visit(p + "self_attention.linear_proj.bias", runtime::Shape{C});
    visit(p + "pre_mlp_layernorm.weight", runtime::Shape{C});
    visit(p + "pre_mlp_layernorm.bias", runtime::Shape{C});
    visit(p + "mlp.linear_fc1.weight", runtime::Shape{F, C});
    visit(p + "mlp.linear_fc1.bias", runtime::Shape{F});
    visit(p + "mlp.linear_fc2.weight", runtime::Shape{C, F});
    visit(p + "mlp.linear_fc2.bias", runtime::Shape{C});
  }
  visit("final_layernorm.weight", runtime::Shape{C});
  visit("final_layernorm.bias", runtime::Shape{C});
}

// FNV-1a: a tensor's init stream is keyed by its name, not its position, so a
// pipeline stage holding a subset of the layers draws the same values.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Standard normal for element `index` of tensor `tensor_id` (Box-Muller on Philox bits).
float philox_normal(uint64_t seed, uint64_t tensor_id, uint64_t index) {
  const uint64_t key = runtime::splitmix64(seed ^ runtime::splitmix64(tensor_id + 0x5eed));
  runtime::Philox4x32 counter{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                               0x1417u, 0}};
  const runtime::Philox4x32 r =
      runtime::philox4x32_10(counter, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  const uint64_t a = (static_cast<uint64_t>(r.v[0]) << 32 | r.v[1]) >> 11;
  const uint64_t b = (static_cast<uint64_t>(r.v[2]) << 32 | r.v[3]) >> 11;
  const double u1 = (static_cast<double>(a) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(b) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace

int64_t GptParams::count(const GptConfig& config) {
  int64_t total = 0;
  for_each_param(config, [&](const std::string&, const runtime::Shape& shape) {
    total += runtime::shape_numel(shape);
  });
  return total;
}

GptParams GptParams::allocate(runtime::Allocator& allocator, const GptConfig& config,
                              runtime::MemoryCategory category) {
  GptParams p;
  p.flat = Tensor::empty(allocator, {count(config)}, runtime::DType::f32, category);
  int64_t offset = 0;
  for_each_param(config, [&](const std::string& name, const runtime::Shape& shape) {
    p.named.push_back({name, p.flat.view(offset, shape), shape.size() >= 2});
    offset += runtime::shape_numel(shape);
  });
  size_t next = 0;
  auto take = [&]() { return p.named[next++].tensor; };
  p.wte = take();
  p.wpe = take();
  p.layers.resize(static_cast<size_t>(config.num_layers));
  for (LayerParams& l : p.layers) {
    l.ln1_weight = take(), l.ln1_bias = take();
    l.qkv_weight = take(), l.qkv_bias = take();
    l.proj_weight = take(), l.proj_bias = take();
    l.ln2_weight = take(), l.ln2_bias = take();
    l.fc1_weight = take(), l.fc1_bias = take();
    l.fc2_weight = take(), l.fc2_bias = take();
  }
  p.lnf_weight = take(), p.lnf_bias = take();
  TRAINER_ASSERT(next == p.named.size(), "parameter layout mismatch");
  return p;
}

const NamedParam* GptParams::find(const std::string& name) const {
  for (const NamedParam& p : named)
    if (p.name == name) return &p;
  return nullptr;
}

void init_params(const GptParams& params, const GptConfig& config, uint64_t seed) {
  const float std_dev = config.init_method_std;
  const float output_std = std_dev / std::sqrt(2.0f * static_cast<float>(config.num_layers));
  for (const NamedParam& p : params.named) {
    float* data = p.tensor.f32();
    const int64_t n = p.tensor.numel();
    if (ends_with(p.name, "layernorm.weight")) {
      for (int64_t i = 0; i < n; ++i) data[i] = 1.f;
    } else if (!p.weight_decay) {  // biases
      for (int64_t i = 0; i < n; ++i) data[i] = 0.f;
    } else {
      const bool output = ends_with(p.name, "linear_proj.weight") ||
                          ends_with(p.name, "linear_fc2.weight");
      const float s = output ? output_std : std_dev;
      const uint64_t tensor_id = name_hash(p.name);
      for (int64_t i = 0; i < n; ++i) data[i] = s * philox_normal(seed, tensor_id, static_cast<uint64_t>(i));
    }
  }
  // Padded vocabulary rows never see a token or a gradient; keep them zero.
  const int64_t C = config.hidden_size;
  float* wte = params.wte.f32();
  for (int64_t i = config.vocab_size * C; i < config.padded_vocab() * C; ++i) wte[i] = 0.f;
}

}  // namespace model
