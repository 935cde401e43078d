// `trainer export`: flags, the checkpoint read a parameter at a time (resharded from any layout)
// into the Hugging Face files, then config.yaml, each written atomically.
#include "trainer/commands/export_command.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <ostream>

#include "runtime/error.h"
#include "trainer/config/config.h"
#include "trainer/export/hf_export.h"
#include "trainer/generate/model_source.h"
#include "trainer/util/atomic_file.h"
#include "trainer/util/format_bytes.h"

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
  // Each parameter read from the checkpoint when the export first needs it and freed after its
  // last tensor: the whole model is never in memory at once.
  const CheckpointWeights weights(options.checkpoint_dir, "export");
  const model::GptConfig& config = weights.config.model;
  LoadedParamValues values(
      config, [&](int64_t, const model::NamedParam& layout, std::vector<float>& out_values) {
        weights.read(layout, out_values.data());
      });
  export_hf(options.output_dir, config, options.dtype, values);
  const std::filesystem::path dir(options.output_dir);
  write_file_atomically((dir / "config.yaml").string(), to_yaml(weights.config));
  out << "exported " << options.checkpoint_dir << " as " << model::hf_class_name(config) << " "
      << hf_torch_dtype(options.dtype) << " to " << options.output_dir << ": model.safetensors ("
      << format_bytes(static_cast<int64_t>(std::filesystem::file_size(dir / "model.safetensors")))
      << "), config.json, config.yaml; held at most " << values.peak_values() << " of the "
      << model::GptParams::count(config) << " parameters at once\n";
  return 0;
}

std::string hf_config_usage() {
  return "usage: trainer hf-config CONFIG_JSON\n"
         "        Print the model: section of the model a Hugging Face config.json describes\n"
         "        (GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config), to paste\n"
         "        into a config that continues pretraining those weights (train.init_from).\n"
         "        What the trainer does not implement is an error naming the field.\n";
}

int run_hf_config(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() != 1 || args[0].starts_with("-"))
    throw runtime::InputError("hf-config: give one config.json (see trainer hf-config --help)");
  std::ifstream in(args[0], std::ios::binary);
  if (!in) throw runtime::InputError("hf-config: cannot read " + args[0]);
  const std::string json{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const model::GptConfig config = model_config_from_hf_json(json, args[0]);
  out << "# The model of " << args[0] << " (" << model::hf_class_name(config) << ", "
      << model::GptParams::count(config) << " parameters). seq_length is its\n"
      << "# max_position_embeddings: set the length to train at; train.init_from names the\n"
      << "# weights beside it.\n"
      << model_yaml(config);
  return 0;
}

}  // namespace trainer
