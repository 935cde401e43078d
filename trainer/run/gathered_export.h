// The Hugging Face export of a run on several ranks, written by world rank 0 without the whole
// model in its memory.
#pragma once

#include <cstdint>
#include <string>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "runtime/dtype.h"

namespace trainer {

// export_hf on world rank 0, which gathers each parameter (parallel::ParamGather) when the writer
// first reaches a tensor made from it and lets it go after the last such tensor: beyond its own
// parameters it holds those of the tensors being written (one, or Llama's fused q/k/v and its
// neighbour), never the whole model. The other ranks send their parts in the same order
// (hf_export_param_reads). Collective over the world. `local`: this rank's parameters, host f32;
// `config`: the whole model's, its word embeddings padded as the run's. When rank 0's export
// fails (the directory, the disk), it still takes every part the others send, then throws.
// Returns, on rank 0, the most gathered values it held at once (0 elsewhere).
int64_t export_hf_gathered(const std::string& dir, parallel::ProcessGroups& groups,
                           const model::GptParams& local, const model::GptConfig& config,
                           runtime::DType dtype);

}  // namespace trainer
