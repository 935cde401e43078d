// The whole model of a finished run or of a resume checkpoint, loaded into one process (host
// f32): `trainer generate` and its tests read it. Rules: a checkpoint of any tp/pp/dp layout loads
// (the reader reshards); every missing or malformed file is an InputError naming it.
#pragma once

#include <memory>
#include <string>

#include "model/gpt_params.h"
#include "runtime/allocator.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"

namespace trainer {

struct LoadedModel {
  Config config;  // the run's config: model.* are the model's shapes, data.path its dataset
  runtime::CpuAllocator allocator;
  model::GptParams params;  // the whole model of config.model (tp 1 padding), host f32
  std::string source;       // what was read, for messages
};

// RUN_DIR/model.safetensors + config.json (the export, Hugging Face layout) with the run's
// RUN_DIR/config.yaml. Without config.yaml the config.json alone describes the model (GPT-2, or
// Llama, Mistral, Qwen2 and Qwen3: a directory as published on the Hugging Face Hub).
std::unique_ptr<LoadedModel> load_exported_model(const std::string& run_dir);

// A checkpoint step directory (step_NNNNNNNN/ with manifest.json): its config and weights.
std::unique_ptr<LoadedModel> load_checkpoint_model(const std::string& step_dir);

// A checkpoint step directory opened for its weights, one parameter at a time: the reader (every
// file's checksum verified) and the run's config. `command` names the caller in messages.
struct CheckpointWeights {
  CheckpointWeights(const std::string& step_dir, const std::string& command);
  CheckpointReader reader;
  Config config;
  // The weights of `p`, a parameter of the whole model (tp 1): its global shape, f32, into `out`
  // (vocabulary padding rows left as they are).
  void read(const model::NamedParam& p, float* out) const;
};

}  // namespace trainer
