// The key/value-cache decoder: the layer's forward for new tokens only, written with the same
// runtime ops as model/layer.cpp (norms, linears, rotary, GELU/SwiGLU) and the flash block
// operator of ring attention for the attention of new queries over the cached keys and values.
#include "model/decoder.h"

#include <cmath>

#include "runtime/error.h"
#include "runtime/ops.h"

namespace model {
namespace {

namespace ops = runtime::ops;
using runtime::DType;

const Tensor& head_weight(const GptParams& p, const GptConfig& config) {
  return config.untie_embeddings ? p.output_weight : p.wte;
}

}  // namespace

Decoder::Decoder(const GptParams& params, const GptConfig& config, runtime::Allocator& allocator)
    : params_(params),
      config_(config),
      dims_(layer_dims(config, /*micro_batch=*/1, /*training=*/false)),
      allocator_(allocator) {
  TRAINER_ASSERT(params.flat.device() == allocator.device() && params.flat.dtype() == DType::f32 &&
                     params.flat.numel() == GptParams::count(config) &&
                     static_cast<int64_t>(params.layers.size()) == config.num_layers,
                 "the decoder runs the whole model, f32, on its allocator's device");
}

Tensor Decoder::workspace(const runtime::Shape& shape, DType dtype) const {
  return Tensor::empty(allocator_, shape, dtype, runtime::MemoryCategory::workspace);
}

KvCache Decoder::new_cache(int64_t capacity) const {
  if (capacity < 1 || (config_.learned_positions() && capacity > config_.positions())) {
    throw runtime::InputError(TRAINER_STR(
        "generate: " << capacity << " positions (prompt + new tokens) do not fit the model's "
                     << config_.positions() << " learned positions (model.seq_length / "
                     << "max_position_embeddings)"));
  }
  KvCache cache;
  cache.capacity = capacity;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    cache.layers.push_back(
        Tensor::empty(allocator_, {capacity, 1, dims_.kv_heads() * 2 * dims_.head_dim}, DType::f32,
                      runtime::MemoryCategory::activation));
  }
  return cache;
}

void Decoder::normalize(const Tensor& out, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, int64_t n) {
  const Tensor rstd = workspace({n});
  if (!dims_.features.layernorm()) {
    ops::rmsnorm_forward({.out = out,
                          .rstd = rstd,
                          .input = x,
                          .weight = weight,
                          .rows = n,
                          .channels = dims_.hidden,
                          .eps = dims_.layernorm_eps});
    return;
  }
  ops::layernorm_forward({.out = out,
                          .mean = workspace({n}),
                          .rstd = rstd,
                          .input = x,
                          .weight = weight,
                          .bias = bias,
                          .rows = n,
                          .channels = dims_.hidden,
                          .eps = dims_.layernorm_eps});
}

void Decoder::layer_forward(const Tensor& x, const LayerParams& w, Tensor& cache_layer,
                            int64_t position, int64_t n) {
  const LayerDims& d = dims_;
  const int64_t C = d.hidden, H = d.heads, D = d.head_dim, seen = position + n;

  // attention: x += proj(attention(rope(qk_norm(qkv(ln1(x)))), cache))
  const Tensor normalized = workspace({n, 1, C});
  normalize(normalized, x, w.ln1_weight, w.ln1_bias, n);
  const Tensor qkv = workspace({n, 1, d.qkv_width()});
  ops::linear_forward({.out = qkv,
                       .input = normalized,
                       .weight = w.qkv_weight,
                       .bias = w.qkv_bias,
                       .rows = n,
                       .in_features = C,
                       .out_features = d.qkv_width()});
  if (d.features.qk_norm) {
    ops::qk_norm_forward({.qkv = qkv,
                          .input = workspace({n, d.qk_heads() * D}),
                          .rstd = workspace({n * d.qk_heads()}),
                          .q_weight = w.q_norm_weight,
                          .k_weight = w.k_norm_weight,
                          .heads = {n, d.kv_heads(), d.features.group_size, D},
                          .eps = d.layernorm_eps});
  }
  if (d.features.rope) {
    ops::rope_forward({.qkv = qkv,
                       .seq = n,
                       .micro_batch = 1,
                       .kv_heads = d.kv_heads(),
                       .group_size = d.features.group_size,
                       .head_dim = D,
                       .seq_offset = position,
                       .base = d.features.rotary_base,
                       .scaling = d.features.rope_scaling});
  }
  ops::pack_kv({.kv = cache_layer.rows(position, n),  // the new positions' k and v
                .qkv = qkv,
                .rows = n,
                .micro_batch = 1,
                .heads = H,
                .head_dim = D,
                .group_size = d.features.group_size});
  const Tensor ctx = workspace({n, 1, H * D});
  ops::flash_block_forward({.ctx = ctx,
                            .lse = workspace({1, H, n}),
                            .qkv = qkv,
                            .kv = cache_layer.rows(0, seen),
                            .dims = {.seq_len = n,
                                     .micro_batch = 1,
                                     .heads = H,
                                     .head_dim = D,
                                     .scale = d.attention_scale(),
                                     .dropout_prob = 0.f,
                                     .dropout_key = {},
                                     .kv_len = seen,
                                     .q_position = position,
                                     .kv_position = 0,
                                     .full_len = seen,
                                     .group_size = d.features.group_size,
                                     .window = d.features.window}});
  const Tensor attention_out = workspace({n, 1, C});
  ops::linear_forward({.out = attention_out,
                       .input = ctx,
                       .weight = w.proj_weight,
                       .bias = w.proj_bias,
                       .rows = n,
                       .in_features = H * D,
                       .out_features = C});
  ops::add({.out = x, .a = x, .b = attention_out, .count = n * C});

  // mlp: x += fc2(act(fc1(ln2(x))))
  normalize(normalized, x, w.ln2_weight, w.ln2_bias, n);
  const Tensor fc1_out = workspace({n, 1, d.fc1_width()});
  ops::linear_forward({.out = fc1_out,
                       .input = normalized,
                       .weight = w.fc1_weight,
                       .bias = w.fc1_bias,
                       .rows = n,
                       .in_features = C,
                       .out_features = d.fc1_width()});
  const Tensor activated = workspace({n, 1, d.ffn});
  if (d.features.swiglu) {
    ops::swiglu_forward({.out = activated, .input = fc1_out, .rows = n, .ffn = d.ffn});
  } else {
    ops::gelu_forward(
        {.out = activated, .input = fc1_out, .count = n * d.ffn, .kind = d.features.gelu});
  }
  const Tensor mlp_out = workspace({n, 1, C});
  ops::linear_forward({.out = mlp_out,
                       .input = activated,
                       .weight = w.fc2_weight,
                       .bias = w.fc2_bias,
                       .rows = n,
                       .in_features = d.ffn,
                       .out_features = C});
  ops::add({.out = x, .a = x, .b = mlp_out, .count = n * C});
}

Tensor Decoder::forward(KvCache& cache, std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), position = cache.length;
  const int64_t C = dims_.hidden, padded_vocab = config_.padded_vocab();
  TRAINER_ASSERT(n > 0 && static_cast<int64_t>(cache.layers.size()) == config_.num_layers,
                 "a forward of " << n << " tokens over a cache of " << cache.layers.size()
                                 << " layers");
  if (position + n > cache.capacity) {
    throw runtime::InputError(TRAINER_STR("generate: position " << position + n - 1
                                                                << " is beyond the cache's "
                                                                << cache.capacity << " positions"));
  }
  // The ids on the host, then (on a device) uploaded.
  const Tensor host_ids = Tensor::empty(host_, {n}, DType::i32, runtime::MemoryCategory::workspace);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t token = tokens[static_cast<size_t>(i)];
    if (token < 0 || token >= config_.vocab_size) {
      throw runtime::InputError(TRAINER_STR("generate: token " << i << " is id " << token
                                                               << ", outside the model's "
                                                               << "vocabulary [0, "
                                                               << config_.vocab_size << ")"));
    }
    host_ids.i32()[i] = token;
  }
  Tensor token_ids = host_ids;
  if (allocator_.device() != runtime::DeviceKind::cpu) {
    token_ids = workspace({n}, DType::i32);
    ops::upload(token_ids, host_ids);
  }

  // x (n, 1, C) = wte[tokens] (+ wpe[positions] with learned positions)
  const Tensor x = workspace({n, 1, C});
  ops::embedding_forward({.out = x,
                          .tokens = token_ids,
                          .wte = params_.wte,
                          .rows = n,
                          .channels = C,
                          .vocab_start = 0,
                          .vocab_rows = padded_vocab});
  if (!dims_.features.rope) {
    ops::position_embedding_forward(
        {.out = x, .wpe = params_.wpe, .seq = n, .micro_batch = 1, .channels = C,
         .seq_offset = position});
  }
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    layer_forward(x, params_.layers[static_cast<size_t>(l)], cache.layers[static_cast<size_t>(l)],
                  position, n);
  }
  cache.length = position + n;

  // logits (n, padded_vocab) = head(final_norm(x))
  const Tensor normalized = workspace({n, 1, C});
  normalize(normalized, x, params_.lnf_weight, params_.lnf_bias, n);
  Tensor logits = workspace({n, padded_vocab});
  ops::linear_forward({.out = logits,
                       .input = normalized,
                       .weight = head_weight(params_, config_),
                       .rows = n,
                       .in_features = C,
                       .out_features = padded_vocab});
  return logits;
}

}  // namespace model
