// Choosing the next token from the logits, and the generation loop over a Decoder. Rules: greedy
// at temperature 0; otherwise draw k of step i is a pure function of (seed, i) (Philox), so a
// seed reproduces a sample on any machine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "model/decoder.h"

namespace trainer {

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  float temperature = 1.0f;  // 0: greedy (the largest logit; the lowest id on ties)
  int64_t top_k = 0;         // draw among the k largest logits only; 0: all of the vocabulary
  uint64_t seed = 1234;
  std::optional<int32_t> stop_id;  // generation ends after this id (the eod), when given
};

// InputError naming the flag when a value is out of range (temperature < 0 or not finite,
// top_k < 0, max_new_tokens < 1).
void check_sampling_options(const SamplingOptions& options);

// The token of logits (vocab columns) for draw `step` of `options.seed`: the argmax at
// temperature 0, else a draw from softmax(logits / temperature) over the top_k largest.
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, int64_t step);

// Runs `prompt` (non-empty) through a fresh cache, then samples up to max_new_tokens tokens, each
// fed back; returns the new tokens (the stop id included when it ends the sample).
std::vector<int32_t> generate_tokens(model::Decoder& decoder, std::span<const int32_t> prompt,
                                     const SamplingOptions& options);

}  // namespace trainer
