// The planner's time model of one rank (docs/planning.md): seconds of a layer's forward,
// backward and each recompute choice for one microbatch, of the embedding and head, and of the
// optimizer. From a calibrated profile (time_profile.h) when its shapes are this rank's, else
// the roofline: every op's matmul FLOPs at the measured GEMM rate plus the bytes it moves at
// the measured copy bandwidth. Either way it says which it used.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/recompute_modules.h"
#include "trainer/config/config.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/chunk_search.h"
#include "trainer/planning/time_profile.h"

namespace trainer {

// A device's rates: measured (a profile's, or measured here for a CPU run) or stated.
struct DeviceRates {
  double gemm_gflops = 0;
  double copy_gbps = 0;
  std::string source;
};

// The rates `config`'s device has without a profile: a CPU run measures them on this machine
// (an sgemm and a copy); a CUDA run takes an H100/H200's datasheet numbers.
DeviceRates default_rates(const Config& config);

// One rank's seconds per microbatch.
struct RankTimes {
  double layer_forward_s = 0;
  double layer_backward_s = 0;  // without rebuilding anything
  // The rebuild of each selective module alone (core_attn, act, layernorm, mlp): the recompute
  // table's forward pieces, from which every entry's rebuild is summed (model/recompute_modules.h).
  std::array<double, 4> module_rebuild_s{};
  model::BlockFeatures features;
  double embedding_forward_s = 0, embedding_backward_s = 0;
  double head_forward_s = 0, head_backward_s = 0;  // final norm, output layer, loss
  double optimizer_s_per_param = 0;
  // Note [Cold stash]: what a layer's forward and backward add when all of plan none's stash
  // went cold between them (a profile's; 0 on the roofline, whose bytes are all traffic); a
  // layer pays them in proportion to the stash its entry keeps (kept_share).
  double stash_cold_forward_s = 0, stash_cold_backward_s = 0;
  // The share of plan none's stash bytes each entry keeps from forward to backward: none and the
  // selective entries by SelectiveModules::mask (every_layer_entry's order), and a full layer's.
  std::array<double, 16> kept_share_by_mask{};
  double full_kept_share = 0;
  bool from_profile = false;
  // The layer, embedding and head times include the tensor- and context-parallel collectives
  // (a profile calibrated over real peers): the comm model adds none of them (step_time.h).
  bool collectives_included = false;

  // A forward piece's rerun: core attention is core_attn's rebuild, the activation act's, the
  // two layernorms half of layernorm's each, fc1 what mlp's rebuild adds to act's.
  double piece_s(model::ForwardPiece piece) const;
  // A selective entry's rebuild: the pieces it reruns (each once); none: 0; full: the forward.
  double rebuild_s(const model::LayerRecompute& entry) const;
  // The share of none's stash that `entry` keeps (1 for none).
  double kept_share(const model::LayerRecompute& entry) const;
  // What that share costs in the layer's forward and backward once cold (Note [Cold stash]).
  double cold_forward_s(const model::LayerRecompute& entry) const {
    return kept_share(entry) * stash_cold_forward_s;
  }
  double cold_backward_s(const model::LayerRecompute& entry) const {
    return kept_share(entry) * stash_cold_backward_s;
  }
};

class CostModel {
 public:
  // `profile_path` names the profile in messages ("" without one).
  CostModel(DeviceRates rates, std::optional<TimeProfile> profile, std::string profile_path);
  // The model `config` plans with: its train.time_profile when set, else default_rates.
  static CostModel for_config(const Config& config);

  // The times of the rank of `setup` (its layer shapes): the profile's when they match.
  RankTimes times(const Config& config, const StageSetup& setup) const;
  // What times() used for `setup`, for the plan's and the log's "time from ..." line.
  std::string source(const Config& config, const StageSetup& setup) const;
  // Whether the profile was measured at `setup`'s shapes (and with config's documents masked when
  // it masks them): then times() are the profile's.
  bool matches(const Config& config, const StageSetup& setup) const;
  // The MFU denominator per rank, GFLOP/s: the profile's or the rates' GEMM rate.
  double peak_gflops() const { return rates_.gemm_gflops; }
  const DeviceRates& rates() const { return rates_; }
  const std::optional<TimeProfile>& profile() const { return profile_; }

 private:
  DeviceRates rates_;
  std::optional<TimeProfile> profile_;
  std::string profile_path_;
};

// The selective entry of one module: `selective{core_attn}` for index 0, in the order of
// RankTimes::module_rebuild_s.
model::LayerRecompute single_module_entry(size_t module);

// The vocabulary rows of the head on this rank (the padded vocabulary's tensor-parallel shard).
int64_t vocab_shard(const Config& config);
// The shape_key a profile of `config`'s rank of `setup` has: its layer shapes, its vocabulary
// shard, and whether it masks documents.
std::string profile_shape_key(const Config& config, const StageSetup& setup);

// The chunk search's prices (nanoseconds per microbatch) from `times`: a selective rebuild plus
// what it all-gathers under sequence parallelism at `gather_s` seconds each; a full layer's
// forward rerun plus its forward communication, `forward_comm_s`.
RecomputePrices time_prices(const RankTimes& times, const model::LayerDims& dims, double gather_s,
                            double forward_comm_s);

}  // namespace trainer
