// `trainer export`: a checkpoint of any parallel layout written as a Hugging Face model
// (GPT2LMHeadModel or LlamaForCausalLM, float32 or bfloat16), as the end of a run writes it with
// output.export, with the run's config.yaml beside it so that `trainer generate --model` reads
// the directory. Bad input is an InputError naming the flag or file.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace trainer {

struct ExportOptions {
  std::string checkpoint_dir;                  // --checkpoint STEP_DIR
  std::string output_dir;                      // --output DIR
  runtime::DType dtype = runtime::DType::f32;  // --dtype float32 | bfloat16
};

ExportOptions parse_export_options(const std::vector<std::string>& args);
std::string export_usage();
int run_export(const ExportOptions& options, std::ostream& out);

}  // namespace trainer
