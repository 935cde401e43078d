// The stored part of a parameter: its slice of the global tensor, the vocabulary cut to
// vocab_size rows.
#include "trainer/checkpoint/stored_params.h"

#include <algorithm>

namespace trainer {

StoredPart stored_part(const model::NamedParam& p, const model::GptConfig& config) {
  StoredPart part{p.global_shape, {p.shard_dim, p.shard_offset, 0}, p.tensor.numel()};
  if (p.shard_dim >= 0) part.slice.length = p.tensor.dim(p.shard_dim);
  if (p.roles.vocab_padded) {
    const int64_t rows =
        std::clamp<int64_t>(config.vocab_size - p.shard_offset, 0, p.tensor.dim(0));
    part.global_shape[0] = config.vocab_size;
    part.slice = {0, p.shard_offset, rows};
    part.elements = rows * p.tensor.dim(1);
  }
  return part;
}

}  // namespace trainer
