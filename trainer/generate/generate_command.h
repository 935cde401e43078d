// `trainer generate`: sampling from a trained model on one process (sample.h), its options and
// its output. Rules: the tokenizer is the dataset's (<prefix>.json of the run's data.path)
// unless the flags name one; bad input is an InputError naming the flag, file or token.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/gpt_params.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/generate/sample.h"
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

}  // namespace trainer
