// The stash spec of a transformer layer: shapes, dtypes and which plan entries
// keep which tensors (DESIGN.md "Recompute semantics").
#include "model/layer_stash.h"

namespace model {

LayerDims layer_dims(const GptConfig& config, int64_t micro_batch, bool training) {
  LayerDims d;
  d.seq = config.seq_length;
  d.micro_batch = micro_batch;
  d.hidden = config.hidden_size;
  d.heads = config.num_attention_heads;
  d.head_dim = config.head_dim();
  d.ffn = config.ffn();
  d.layernorm_eps = config.layernorm_epsilon;
  d.gelu = config.activation == Activation::gelu ? runtime::cpu::GeluKind::erf
                                                         : runtime::cpu::GeluKind::tanh;
  d.hidden_dropout = training ? config.hidden_dropout : 0.f;
  d.attention_dropout = training ? config.attention_dropout : 0.f;
  return d;
}

LayerDims with_tensor_parallel(LayerDims d, parallel::Communicator* tp,
                                      int64_t tp_size, int64_t tp_rank, bool sequence_parallel) {
  d.heads /= tp_size;
  d.ffn /= tp_size;
  d.tp = tp_size > 1 ? tp : nullptr;
  d.tp_size = tp_size;
  d.tp_rank = tp_rank;
  d.sequence_parallel = sequence_parallel && tp_size > 1;
  return d;
}


std::vector<StashTensorSpec> layer_stash_spec(const LayerDims& d, const LayerRecompute& entry) {
  using runtime::DType;
  const DType act = d.activation_dtype;
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden, H = d.heads,
                D = d.head_dim, F = d.ffn;
  const bool full = entry.mode == RecomputeMode::full;
  const bool selective = entry.mode == RecomputeMode::selective;
  const SelectiveModules m = selective ? entry.modules : SelectiveModules{};
  const bool attn_dropout = d.attention_dropout > 0.f;
  const bool hidden_dropout = d.hidden_dropout > 0.f;

  std::vector<StashTensorSpec> spec;
  auto add = [&](const char* name, Tensor LayerStash::*member, runtime::Shape shape, DType dtype,
                 bool dropped) { spec.push_back({name, member, std::move(shape), dtype, !full && !dropped}); };
  add("input", &LayerStash::input, {Ts, B, C}, act, false);
  add("ln1_mean", &LayerStash::ln1_mean, {Ts * B}, DType::f32, false);
  add("ln1_rstd", &LayerStash::ln1_rstd, {Ts * B}, DType::f32, false);
  add("ln1_out", &LayerStash::ln1_out, {Ts, B, C}, act, m.layernorm);
  add("q", &LayerStash::q, {B, H, T, D}, act, false);
  add("k", &LayerStash::k, {B, H, T, D}, act, false);
  add("v", &LayerStash::v, {B, H, T, D}, act, false);
  add("probs", &LayerStash::probs, {B, H, T, T}, act, m.core_attn);
  if (attn_dropout) {
    add("attn_mask", &LayerStash::attn_mask, {B, H, T, T}, DType::u8, m.core_attn);
    add("probs_drop", &LayerStash::probs_drop, {B, H, T, T}, act, m.core_attn);
  }
  add("ctx", &LayerStash::ctx, {T, B, H * D}, act, false);
  if (hidden_dropout) add("attn_out_mask", &LayerStash::attn_out_mask, {Ts, B, C}, DType::u8, false);
  add("residual", &LayerStash::residual, {Ts, B, C}, act, false);
  add("ln2_mean", &LayerStash::ln2_mean, {Ts * B}, DType::f32, false);
  add("ln2_rstd", &LayerStash::ln2_rstd, {Ts * B}, DType::f32, false);
  add("ln2_out", &LayerStash::ln2_out, {Ts, B, C}, act, m.layernorm);
  add("fc1_out", &LayerStash::fc1_out, {T, B, F}, act, m.mlp);
  add("gelu_out", &LayerStash::gelu_out, {T, B, F}, act, m.act || m.mlp);
  if (hidden_dropout) add("mlp_out_mask", &LayerStash::mlp_out_mask, {Ts, B, C}, DType::u8, false);
  return spec;
}

int64_t stash_kept_bytes(const std::vector<StashTensorSpec>& spec) {
  int64_t bytes = 0;
  for (const StashTensorSpec& s : spec)
    if (s.kept) bytes += s.bytes();
  return bytes;
}

int64_t stash_dropped_bytes(const std::vector<StashTensorSpec>& spec) {
  int64_t bytes = 0;
  for (const StashTensorSpec& s : spec)
    if (!s.kept) bytes += s.bytes();
  return bytes;
}

std::string to_string(const LayerRecompute& entry) {
  switch (entry.mode) {
    case RecomputeMode::none: return "none";
    case RecomputeMode::full: return "full";
    case RecomputeMode::selective: break;
  }
  std::string s = "selective{";
  const SelectiveModules& m = entry.modules;
  const char* sep = "";
  for (auto [on, name] : {std::pair{m.core_attn, "core_attn"}, std::pair{m.act, "act"},
                          std::pair{m.layernorm, "layernorm"}, std::pair{m.mlp, "mlp"}}) {
    if (on) s += sep, s += name, sep = ",";
  }
  return s + "}";
}

}  // namespace model
