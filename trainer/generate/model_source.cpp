// Loading the whole model from an export (through the Hugging Face name -> transform tables of
// trainer/export) or from a checkpoint (through the resharding reader, parameter by parameter).
#include "trainer/generate/model_source.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/error.h"
#include "trainer/checkpoint/stored_params.h"
#include "trainer/export/hf_export.h"
#include "trainer/export/hf_gpt2.h"
#include "trainer/export/safetensors_index.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw runtime::InputError("generate: cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::unique_ptr<LoadedModel> allocate(const Config& config, const std::string& source) {
  auto loaded = std::make_unique<LoadedModel>();
  loaded->config = config;
  loaded->source = source;
  loaded->params = model::GptParams::allocate(loaded->allocator, config.model,
                                              runtime::MemoryCategory::param);
  loaded->params.flat.zero_();  // vocabulary padding rows: 0
  return loaded;
}

}  // namespace

std::unique_ptr<LoadedModel> load_exported_model(const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (!fs::is_directory(dir))
    throw runtime::InputError("generate: --model " + run_dir + ": no such directory");
  // One file, or a published model's shards named by their index.
  const std::optional<std::string> weights = hf_weights_in(run_dir);
  const fs::path json = dir / "config.json", yaml = dir / "config.yaml";
  if (!weights) {
    throw runtime::InputError("generate: --model " + run_dir +
                              ": no model.safetensors (the run writes it at its end with "
                              "output.export: true; a checkpoint loads with --checkpoint) and no "
                              "model.safetensors.index.json");
  }
  Config config;
  if (fs::exists(yaml)) {
    config = parse_config(read_file(yaml), yaml.string(), {}, ConfigUse::plan);
  } else if (fs::exists(json)) {
    config.model = model_config_from_hf_json(read_file(json), json.string());
  } else {
    throw runtime::InputError("generate: --model " + run_dir +
                              ": neither config.yaml (the run's) nor config.json beside "
                              "model.safetensors");
  }
  auto loaded = allocate(config, *weights);
  import_whole(*open_hf_import(*weights, config.model), loaded->params);
  return loaded;
}

namespace {

CheckpointReader open_step(const std::string& step_dir, const std::string& command) {
  if (!fs::exists(fs::path(step_dir) / "manifest.json")) {
    throw runtime::InputError(command + ": --checkpoint " + step_dir +
                              ": no manifest.json (expected a step directory, "
                              "<checkpoint.dir>/step_NNNNNNNN)");
  }
  return CheckpointReader(step_dir, ChecksumPolicy::verify_all);
}

}  // namespace

CheckpointWeights::CheckpointWeights(const std::string& step_dir, const std::string& command)
    : reader(open_step(step_dir, command)),
      config(parse_config(reader.meta().config_yaml, step_dir + "/manifest.json (config)", {},
                          ConfigUse::plan)) {}

void CheckpointWeights::read(const model::NamedParam& p, float* out) const {
  const StoredPart part = stored_part(p, config.model);
  reader.read(kStateNames[0] + p.name, part.global_shape, part.slice, runtime::DType::f32, out);
}

std::unique_ptr<LoadedModel> load_checkpoint_model(const std::string& step_dir) {
  const CheckpointWeights weights(step_dir, "generate");
  auto loaded = allocate(weights.config, step_dir);
  for (const model::NamedParam& p : loaded->params.named) weights.read(p, p.tensor.f32());
  return loaded;
}

}  // namespace trainer
