// A sample of a whole model in one process, for `trainer generate` and the training run's
// train.sample_interval: the prompt's ids, the tokens generated with a key/value cache
// (model/decoder.h) and their text. Bad input is an InputError naming the token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_params.h"
#include "runtime/allocator.h"
#include "trainer/generate/sampling.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

// A sample and its text.
struct Sample {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  std::string text;  // the prompt's and the generated tokens' text (valid UTF-8); "" untokenized
};

// The prompt's ids: its tokens, or the eod id alone when it is empty. InputError when an id is
// outside the model's vocabulary (the tokenizer does not fit the model) or there is no eod id.
std::vector<int32_t> prompt_ids(const std::string& prompt, const tokenizer::Tokenizer& tokenizer,
                                const model::GptConfig& config);

// Generates from `prompt` with the whole model `params` of `config` (f32: on the host, or on the
// device of `device`, its allocator); the text is decoded when `tokenizer` is given (a stop id
// ends the text and is not part of it).
Sample generate_sample(const model::GptParams& params, const model::GptConfig& config,
                       const std::vector<int32_t>& prompt, const SamplingOptions& sampling,
                       const tokenizer::Tokenizer* tokenizer, runtime::Allocator* device = nullptr);

}  // namespace trainer
