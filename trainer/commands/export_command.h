// `trainer export`: a checkpoint of any parallel layout written as a Hugging Face model
// (GPT2LMHeadModel, LlamaForCausalLM, Qwen2's or Qwen3's; float32 or bfloat16), read a parameter
// at a time, as the end of a run writes it with
// output.export, with the run's config.yaml beside it so that `trainer generate --model` reads
// the directory; and `trainer hf-config`, a published config.json as a model: section. Bad input
// is an InputError naming the flag or file.
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

// `trainer hf-config CONFIG_JSON`: the model: section a Hugging Face config.json describes (GPT-2,
// Llama, Mistral, Qwen2, Qwen3), to paste into a config for continued pretraining of those
// weights (train.init_from) or to check against one.
std::string hf_config_usage();
int run_hf_config(const std::vector<std::string>& args, std::ostream& out);

}  // namespace trainer
