// Which part of a model parameter a resume checkpoint stores, and under which name: read by the
// trainer's save and load and by `trainer generate --checkpoint`. Rules: vocabulary padding rows
// are never stored, so any tensor-parallel padding reads any other.
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt_params.h"
#include "trainer/checkpoint/checkpoint.h"

namespace trainer {

// The checkpoint names' prefixes of the weights and the two Adam moments ("param/<name>", ...).
inline constexpr const char* kStateNames[] = {"param/", "exp_avg/", "exp_avg_sq/"};

// The part of `p` a checkpoint stores: everything but padded vocabulary rows.
struct StoredPart {
  std::vector<int64_t> global_shape;
  ShardSlice slice;
  int64_t elements;  // from the start of the local tensor
};
StoredPart stored_part(const model::NamedParam& p, const model::GptConfig& config);

}  // namespace trainer
