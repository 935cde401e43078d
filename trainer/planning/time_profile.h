// A calibration's measurements (trainer calibrate, docs/planning.md): seconds of one layer's
// forward, backward and every selective rebuild for one microbatch on one rank, the embedding
// and head, the optimizer per parameter, and the device's GEMM rate and copy bandwidth. Keyed by
// device, dtype, shapes and build; written and read as JSON. Pure data: measuring is
// calibrate.h's, using it cost_model.h's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/layer_stash.h"
#include "trainer/config/config.h"

namespace trainer {

struct RebuildTime {
  std::string entry;  // model::to_string of a selective entry: "selective{core_attn,act}"
  double seconds = 0;
};

struct TimeProfile {
  std::string device;      // "cpu: <model name>, N threads" or "cuda: <name>"
  std::string dtype;       // the activations' dtype: "f32" or "bf16"
  std::string shapes;      // shape_key() of the rank the pieces were measured at
  std::string build;       // trainer version and git revision
  int64_t repeats = 0;     // timed runs of each piece (the median is kept)
  double gemm_gflops = 0;  // the best large GEMM measured: the roofline's rate and the MFU peak
  double copy_gbps = 0;    // device-to-device copy bandwidth, bytes read + written per second / 1e9
  double layer_forward_s = 0;   // one layer, plan none
  double layer_backward_s = 0;  // one layer, without any rebuild
  // What plan none's forward and backward add when the stash between them went cold, as in a
  // step: the other layers' stashes pass through the caches in between (Note [Cold stash]).
  // Absent from profiles written before it: 0.
  double stash_cold_forward_s = 0;
  double stash_cold_backward_s = 0;
  std::vector<RebuildTime> rebuild;     // each selective entry the planner may choose
  double embedding_head_forward_s = 0;  // embedding + output head + loss, one microbatch
  double embedding_head_backward_s = 0;
  double optimizer_s_per_param = 0;  // grad norm, clip, AdamW, zeroing grads, per parameter
  int64_t ranks = 1;                 // processes that calibrated side by side (under mpirun)
  // The layer, embedding and head pieces include the rank's tensor- and context-parallel
  // collectives, run over real peers (`mpirun -np N trainer calibrate` with tp x cp > 1); else
  // they ran over the meta replay, and the comm model adds them (step_time.h).
  bool collectives_measured = false;
};

// What a profile's layer times depend on: the rank's layer shapes and features, the attention
// backend, the dtypes, tensor/sequence/context parallel places, the vocabulary shard, and whether
// attention was timed with documents masked (`documents`: data.reset_attention_mask; Note [Timed
// documents] in calibrate.cpp).
std::string shape_key(const model::LayerDims& dims, int64_t vocab_shard, bool documents);

// The rebuild time of `entry` (selective), or nullptr when the profile has none for it.
const RebuildTime* find_rebuild(const TimeProfile& profile, const std::string& entry);

// JSON, every field; reading throws runtime::InputError naming the file (`path`: where the text
// came from) and the field.
std::string time_profile_json(const TimeProfile& profile);
TimeProfile parse_time_profile(const std::string& text, const std::string& path);
void write_time_profile(const TimeProfile& profile, const std::string& path);
TimeProfile read_time_profile(const std::string& path);

}  // namespace trainer
