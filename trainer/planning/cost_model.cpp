// The roofline and the profile lookup. Roofline bytes: a piece writes its stash tensors once and
// its consumer reads them once (2x the bytes it keeps or rebuilds); backward moves twice
// forward's bytes and spends twice its FLOPs; AdamW with the grad norm and clipping moves 40
// bytes per fp32 parameter (read param, grad, both moments, the grad twice more; write param,
// moments, grad).
#include "trainer/planning/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/embedding_head.h"
#include "model/flops.h"
#include "model/recompute_modules.h"
#include "runtime/error.h"
#include "trainer/planning/calibrate.h"

namespace trainer {
namespace {

constexpr double kStatedHbmGbps = 3350.0;       // H100 SXM HBM3, datasheet
constexpr double kOptimizerBytesPerParam = 40;  // see the header comment

struct Roofline {
  const DeviceRates& rates;
  double gemm_s(double flops) const { return flops / (rates.gemm_gflops * 1e9); }
  double bytes_s(double bytes) const { return bytes / (rates.copy_gbps * 1e9); }
};

RankTimes roofline_times(const Config& config, const StageSetup& setup, const DeviceRates& rates) {
  const Roofline r{rates};
  const model::LayerDims& d = setup.dims;
  const double flops = static_cast<double>(model::layer_forward_flops(d).total());
  const double kept = static_cast<double>(model::stash_kept_bytes(model::layer_stash_spec(d, {})));
  RankTimes t;
  t.layer_forward_s = r.gemm_s(flops) + r.bytes_s(2 * kept);
  t.layer_backward_s = r.gemm_s(2 * flops) + r.bytes_s(4 * kept);
  t.features = d.features;
  auto share = [&](const model::LayerRecompute& entry) {
    return kept > 0
               ? static_cast<double>(model::stash_kept_bytes(model::layer_stash_spec(d, entry))) /
                     kept
               : 0.0;
  };
  for (const model::LayerRecompute& entry : every_layer_entry())
    t.kept_share_by_mask[static_cast<size_t>(entry.modules.mask())] = share(entry);
  t.full_kept_share = share({model::RecomputeMode::full, {}});
  for (size_t m = 0; m < t.module_rebuild_s.size(); ++m) {
    const model::LayerRecompute entry = single_module_entry(m);
    const auto spec = model::layer_stash_spec(d, entry);
    t.module_rebuild_s[m] =
        r.gemm_s(static_cast<double>(model::selective_recompute_flops(d, entry))) +
        r.bytes_s(2.0 * static_cast<double>(model::stash_dropped_bytes(spec)));
  }
  const double hidden_bytes = static_cast<double>(d.seq_shard() * d.micro_batch * d.hidden *
                                                  runtime::dtype_size(d.activation_dtype));
  const double head_flops = static_cast<double>(model::head_forward_flops(d, vocab_shard(config)));
  const double logits_bytes = static_cast<double>(d.seq * d.micro_batch * vocab_shard(config) * 4);
  t.embedding_forward_s = r.bytes_s(2 * hidden_bytes);
  t.embedding_backward_s = r.bytes_s(4 * hidden_bytes);
  t.head_forward_s = r.gemm_s(head_flops) + r.bytes_s(2 * logits_bytes);
  t.head_backward_s = r.gemm_s(2 * head_flops) + r.bytes_s(3 * logits_bytes);
  t.optimizer_s_per_param = r.bytes_s(kOptimizerBytesPerParam);
  return t;
}

}  // namespace

model::LayerRecompute single_module_entry(size_t module) {
  model::LayerRecompute entry{model::RecomputeMode::selective, {}};
  const auto& rows = model::selective_module_table();
  TRAINER_ASSERT(module < rows.size(), "module " << module);
  entry.modules.*(rows[module].flag) = true;
  return entry;
}

double RankTimes::piece_s(model::ForwardPiece piece) const {
  using model::ForwardPiece;
  const auto& [core_attn, act, layernorm, mlp] = module_rebuild_s;
  switch (piece) {
    case ForwardPiece::input_layernorm:
    case ForwardPiece::pre_mlp_layernorm:
      return layernorm / 2;
    case ForwardPiece::core_attn_probs:
    case ForwardPiece::flash_attention:
      return core_attn;
    case ForwardPiece::fc1:
      return std::max(0.0, mlp - act);
    case ForwardPiece::act:
      return act;
  }
  return 0;
}

double RankTimes::rebuild_s(const model::LayerRecompute& entry) const {
  if (entry.mode == model::RecomputeMode::none) return 0;
  if (entry.mode == model::RecomputeMode::full) return layer_forward_s;
  double seconds = 0;
  for (const model::ForwardPiece piece : model::rerun_pieces(entry, features))
    seconds += piece_s(piece);
  return seconds;
}

double RankTimes::kept_share(const model::LayerRecompute& entry) const {
  if (entry.mode == model::RecomputeMode::full) return full_kept_share;
  return kept_share_by_mask[static_cast<size_t>(entry.modules.mask())];  // none: mask 0
}

int64_t vocab_shard(const Config& config) {
  const int64_t tp = config.parallel.tensor;
  return config.model.padded_vocab(tp) / tp;
}

std::string profile_shape_key(const Config& config, const StageSetup& setup) {
  return shape_key(setup.dims, vocab_shard(config), config.data.reset_attention_mask);
}

DeviceRates default_rates(const Config& config) {
  if (config.train.device == Device::cuda) {
    const bool bf16 = uses_bf16(config.train);
    const double peak = config.train.peak_tflops > 0 ? config.train.peak_tflops
                        : bf16                       ? kBf16PeakTflops
                                                     : kFp32PeakTflops;
    return {peak * 1e3, kStatedHbmGbps,
            "stated: H100/H200 dense " + std::string(bf16 ? "bf16" : "fp32") + " peak, HBM3 " +
                std::to_string(static_cast<int>(kStatedHbmGbps)) + " GB/s"};
  }
  // Two significant figures: what varies between measurements does not change the plan.
  auto round2 = [](double x) {
    const double scale = std::pow(10.0, std::floor(std::log10(x)) - 1);
    return std::round(x / scale) * scale;
  };
  const MeasuredRates measured = measure_host_rates();
  const double gemm = round2(measured.gemm_gflops), copy = round2(measured.copy_gbps);
  char source[128];
  std::snprintf(source, sizeof source, "measured on this CPU: GEMM %g GFLOP/s, copy %g GB/s", gemm,
                copy);
  return {gemm, copy, source};
}

CostModel::CostModel(DeviceRates rates, std::optional<TimeProfile> profile,
                     std::string profile_path)
    : rates_(std::move(rates)),
      profile_(std::move(profile)),
      profile_path_(std::move(profile_path)) {
  if (profile_) {
    rates_ = {profile_->gemm_gflops, profile_->copy_gbps,
              "measured by the profile " + profile_path_ + " (" + profile_->device + ")"};
  }
}

CostModel CostModel::for_config(const Config& config) {
  if (!config.train.time_profile.empty()) {
    TimeProfile profile = read_time_profile(config.train.time_profile);
    return CostModel({}, std::move(profile), config.train.time_profile);
  }
  return CostModel(default_rates(config), std::nullopt, "");
}

bool CostModel::matches(const Config& config, const StageSetup& setup) const {
  return profile_ && profile_->shapes == profile_shape_key(config, setup);
}

RankTimes CostModel::times(const Config& config, const StageSetup& setup) const {
  RankTimes roofline = roofline_times(config, setup, rates_);
  if (!matches(config, setup)) return roofline;
  const TimeProfile& p = *profile_;
  RankTimes t = roofline;
  t.from_profile = true;
  t.layer_forward_s = p.layer_forward_s;
  t.layer_backward_s = p.layer_backward_s;
  t.stash_cold_forward_s = p.stash_cold_forward_s;
  t.stash_cold_backward_s = p.stash_cold_backward_s;
  for (size_t m = 0; m < t.module_rebuild_s.size(); ++m)
    if (const RebuildTime* measured = find_rebuild(p, model::to_string(single_module_entry(m))))
      t.module_rebuild_s[m] = measured->seconds;
  // The profile measures the embedding and the head together; split as the roofline does.
  const double forward = roofline.embedding_forward_s + roofline.head_forward_s;
  const double backward = roofline.embedding_backward_s + roofline.head_backward_s;
  t.embedding_forward_s = p.embedding_head_forward_s * roofline.embedding_forward_s / forward;
  t.head_forward_s = p.embedding_head_forward_s - t.embedding_forward_s;
  t.embedding_backward_s = p.embedding_head_backward_s * roofline.embedding_backward_s / backward;
  t.head_backward_s = p.embedding_head_backward_s - t.embedding_backward_s;
  t.optimizer_s_per_param = p.optimizer_s_per_param;
  t.collectives_included = p.collectives_measured;
  return t;
}

std::string CostModel::source(const Config& config, const StageSetup& setup) const {
  if (matches(config, setup)) return "the profile " + profile_path_ + " (" + profile_->device + ")";
  std::string text = "the roofline (" + rates_.source + ")";
  if (!profile_) return text;
  // The same shapes but other documents (Note [Timed documents] in calibrate.cpp): say which.
  const int64_t vocab = vocab_shard(config);
  if (profile_->shapes == shape_key(setup.dims, vocab, true)) {
    text += "; the profile timed attention with documents masked, which this run does not mask";
  } else if (profile_->shapes == shape_key(setup.dims, vocab, false)) {
    text +=
        "; the profile timed attention without the documents' mask this run applies (calibrate "
        "with data.reset_attention_mask)";
  } else {
    text += "; the profile's shapes are not this run's";
  }
  return text;
}

RecomputePrices time_prices(const RankTimes& times, const model::LayerDims& dims, double gather_s,
                            double forward_comm_s) {
  // A rebuild's price is what it adds to the step: its rerun, less what the stash it no longer
  // keeps would have cost cold (Note [Cold stash]); never below 0.
  auto ns = [](double seconds) { return static_cast<int64_t>(std::max(seconds, 0.0) * 1e9 + 0.5); };
  const double cold = times.stash_cold_forward_s + times.stash_cold_backward_s;
  auto saved = [times, cold](const model::LayerRecompute& entry) {
    return (1.0 - times.kept_share(entry)) * cold;
  };
  RecomputePrices prices;
  prices.full_layer =
      ns(times.layer_forward_s + forward_comm_s - saved({model::RecomputeMode::full, {}}));
  prices.selective = [times, dims, gather_s, ns, saved](const model::LayerRecompute& entry) {
    const double gathers =
        static_cast<double>(model::rebuild_input_gathers(entry, dims.features)) * gather_s;
    return ns(times.rebuild_s(entry) + gathers - saved(entry));
  };
  return prices;
}

}  // namespace trainer
