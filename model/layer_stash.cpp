// The stash spec of a transformer layer: shapes and dtypes here, which plan entries
// drop which tensors from the recompute table (model/recompute_modules.h).
#include "model/layer_stash.h"

#include <cmath>

#include "model/recompute_modules.h"

namespace model {

BlockFeatures block_features(const GptConfig& config) {
  return {.attention = config.attention_backend,
          .gelu = config.activation == Activation::gelu ? runtime::GeluKind::erf
                                                        : runtime::GeluKind::tanh,
          .norm = config.normalization,
          .swiglu = config.swiglu(),
          .rope = !config.learned_positions(),
          .rotary_base = config.rotary_base,
          .rope_scaling = config.rope_scaling,
          .group_size = config.group_size(),
          .linear_bias = config.add_bias_linear,
          .qkv_bias = config.qkv_bias(),
          .qk_norm = config.qk_layernorm,
          .window = config.sliding_window};
}

float LayerDims::attention_scale() const {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return features.rope ? scale * features.rope_scaling.score_factor() : scale;
}

LayerDims layer_dims(const GptConfig& config, int64_t micro_batch, bool training) {
  LayerDims d;
  d.seq = config.seq_length;
  d.micro_batch = micro_batch;
  d.hidden = config.hidden_size;
  d.heads = config.num_attention_heads;
  d.head_dim = config.head_dim();
  d.ffn = config.ffn();
  d.layernorm_eps = config.layernorm_epsilon;
  d.features = block_features(config);
  d.hidden_dropout = training ? config.hidden_dropout : 0.f;
  d.attention_dropout = training ? config.attention_dropout : 0.f;
  return d;
}

LayerDims with_tensor_parallel(LayerDims d, int64_t tp_size, int64_t tp_rank,
                               bool sequence_parallel) {
  d.heads /= tp_size;
  d.ffn /= tp_size;
  d.tp_size = tp_size;
  d.tp_rank = tp_rank;
  d.sequence_parallel = sequence_parallel && tp_size > 1;
  return d;
}

LayerDims with_context_parallel(LayerDims d, int64_t cp_size, int64_t cp_rank) {
  d.seq /= cp_size;
  d.cp_size = cp_size;
  d.cp_rank = cp_rank;
  return d;
}

StashSpec<LayerStash> layer_stash_spec(const LayerDims& d, const LayerRecompute& entry) {
  using runtime::DType;
  using S = LayerStash;
  const DType act = d.activation_dtype;
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden, H = d.heads,
                D = d.head_dim, F = d.ffn;
  const bool full = entry.mode == RecomputeMode::full;

  StashSpec<LayerStash> spec;
  auto add = [&](const char* name, Tensor S::*member, runtime::Shape shape, DType dtype) {
    const bool kept = !full && !drops(entry, d.features, member);
    spec.push_back({name, member, std::move(shape), dtype, kept, member == &S::input});
  };
  const int64_t Hkv = d.kv_heads();
  const bool layernorm = d.features.layernorm();
  add("input", &S::input, {Ts, B, C}, act);
  if (layernorm) add("ln1_mean", &S::ln1_mean, {Ts * B}, DType::f32);
  add("ln1_rstd", &S::ln1_rstd, {Ts * B}, DType::f32);
  add("ln1_out", &S::ln1_out, {Ts, B, C}, act);
  if (d.features.qk_norm) {
    add("qk_input", &S::qk_input, {T, B, d.qk_heads() * D}, act);
    add("qk_rstd", &S::qk_rstd, {T * B * d.qk_heads()}, DType::f32);
  }
  if (d.features.flash()) {
    add("qkv", &S::qkv, {T, B, d.qkv_width()}, act);
    add("lse", &S::lse, {B, H, T}, DType::f32);
  } else {
    add("q", &S::q, {B, H, T, D}, act);
    add("k", &S::k, {B, Hkv, T, D}, act);
    add("v", &S::v, {B, Hkv, T, D}, act);
    add("probs", &S::probs, {B, H, T, T}, act);
    if (d.attention_dropout > 0.f) {
      add("attn_mask", &S::attn_mask, {B, H, T, T}, DType::u8);
      add("probs_drop", &S::probs_drop, {B, H, T, T}, act);
    }
  }
  add("ctx", &S::ctx, {T, B, H * D}, act);
  if (d.hidden_dropout > 0.f) add("attn_out_mask", &S::attn_out_mask, {Ts, B, C}, DType::u8);
  add("residual", &S::residual, {Ts, B, C}, act);
  if (layernorm) add("ln2_mean", &S::ln2_mean, {Ts * B}, DType::f32);
  add("ln2_rstd", &S::ln2_rstd, {Ts * B}, DType::f32);
  add("ln2_out", &S::ln2_out, {Ts, B, C}, act);
  add("fc1_out", &S::fc1_out, {T, B, d.fc1_width()}, act);
  add(d.features.swiglu ? "swiglu_out" : "gelu_out", &S::gelu_out, {T, B, F}, act);
  if (d.hidden_dropout > 0.f) add("mlp_out_mask", &S::mlp_out_mask, {Ts, B, C}, DType::u8);
  return spec;
}

}  // namespace model
