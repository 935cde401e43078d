// `trainer generate`: sampling from a trained model on one process, with a key/value cache, and
// the text of a sample for the training run's train.sample_interval. Rules: the tokenizer is the
// dataset's (<prefix>.json of the run's data.path) unless the flags name one; bad input is an
// InputError naming the flag, file or token.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/gpt_params.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/generate/sampling.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

struct GenerateOptions {
  std::string model_dir;       // --model RUN_DIR (an export)
  std::string checkpoint_dir;  // --checkpoint STEP_DIR
  std::string prompt;          // empty: the tokenizer's eod id alone, as a document's start
  SamplingOptions sampling;
  std::optional<tokenizer::TokenizerSpec> tokenizer;  // from --tokenizer and its file flags
  bool print_ids = false;
  Device device = Device::cpu;  // --device: cuda runs the decoder on the first GPU
};

GenerateOptions parse_generate_options(const std::vector<std::string>& args);
std::string generate_usage();
// `device`: the GPU's allocator (its CUDA context set up by the caller) with --device cuda,
// nullptr with cpu.
int run_generate(const GenerateOptions& options, std::ostream& out,
                 runtime::Allocator* device = nullptr);

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
