// `trainer export`: flags, the checkpoint loaded into one process (resharded from any layout),
// then the Hugging Face files and config.yaml written atomically.
#include "trainer/export_command.h"

#include <filesystem>
#include <memory>
#include <ostream>

#include "runtime/error.h"
#include "trainer/atomic_file.h"
#include "trainer/config/config.h"
#include "trainer/export/hf_export.h"
#include "trainer/generate/model_source.h"
#include "trainer/metrics.h"

namespace trainer {

std::string export_usage() {
  return "usage: trainer export --checkpoint STEP_DIR --output DIR [--dtype float32|bfloat16]\n"
         "        Write a checkpoint step directory of any parallel layout as a Hugging Face\n"
         "        model: DIR/model.safetensors and config.json (GPT2LMHeadModel for a GPT-2\n"
         "        block, LlamaForCausalLM, or Qwen2's or Qwen3's, for a Llama block), and the\n"
         "        run's config.yaml, so that `trainer generate --model DIR` samples from it.\n"
         "        --dtype: the tensors' type (default float32; bfloat16 rounds to the nearest,\n"
         "        halving the files).\n";
}

ExportOptions parse_export_options(const std::vector<std::string>& args) {
  ExportOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag != "--checkpoint" && flag != "--output" && flag != "--dtype")
      throw runtime::InputError("export: unknown argument '" + flag +
                                "' (see trainer export --help)");
    if (i + 1 >= args.size()) throw runtime::InputError("export: " + flag + " needs a value");
    const std::string& value = args[++i];
    if (flag == "--checkpoint") {
      options.checkpoint_dir = value;
    } else if (flag == "--output") {
      options.output_dir = value;
    } else if (flag == "--dtype") {
      if (value != "float32" && value != "bfloat16")
        throw runtime::InputError("export: --dtype \"" + value +
                                  "\": expected float32 or bfloat16");
      options.dtype = value == "bfloat16" ? runtime::DType::bf16 : runtime::DType::f32;
    }
  }
  if (options.checkpoint_dir.empty() || options.output_dir.empty())
    throw runtime::InputError("export: give --checkpoint STEP_DIR and --output DIR");
  return options;
}

int run_export(const ExportOptions& options, std::ostream& out) {
  const std::unique_ptr<LoadedModel> loaded = load_checkpoint_model(options.checkpoint_dir);
  export_hf(options.output_dir, loaded->params, loaded->config.model, options.dtype);
  const std::filesystem::path dir(options.output_dir);
  write_file_atomically((dir / "config.yaml").string(), to_yaml(loaded->config));
  out << "exported " << options.checkpoint_dir << " as "
      << model::hf_class_name(loaded->config.model) << " " << hf_torch_dtype(options.dtype)
      << " to " << options.output_dir << ": model.safetensors ("
      << format_bytes(static_cast<int64_t>(std::filesystem::file_size(dir / "model.safetensors")))
      << "), config.json, config.yaml\n";
  return 0;
}

}  // namespace trainer
