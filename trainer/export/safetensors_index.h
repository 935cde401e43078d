// Hugging Face checkpoints saved in shards: model.safetensors.index.json maps every tensor to
// the shard file (beside the index) that holds it, as save_pretrained writes past its shard size
// (Llama 3.2 3B in 2 shards, Llama 3.1 8B in 4).
#pragma once

#include <optional>
#include <string>

#include "trainer/export/safetensors.h"

namespace trainer {

// The tensors of every shard `index_path` (a *.safetensors.index.json) maps, as one file: each
// tensor from the shard the index names. InputError naming the file for an index that is not a
// JSON object with a "weight_map" object of file names, a shard that cannot be read, a tensor
// the index maps that its shard lacks, or a tensor in two shards.
SafetensorsFile read_safetensors_shards(const std::string& index_path,
                                        SafetensorsRead read = SafetensorsRead::whole);

// The weights file of a directory: its model.safetensors, else its model.safetensors.index.json
// (as a model is published on the Hugging Face Hub); nullopt when it has neither.
std::optional<std::string> hf_weights_in(const std::string& dir);

// `path` as a weights file: a directory's hf_weights_in (InputError naming a directory without
// one), any other path as it is.
std::string hf_weights_path(const std::string& path);

// A model's weights (`path` through hf_weights_path): the shards of a *.safetensors.index.json,
// else one safetensors file.
SafetensorsFile read_hf_weights(const std::string& path,
                                SafetensorsRead read = SafetensorsRead::whole);

}  // namespace trainer
