// Assembles the whole model on world rank 0 from the ranks that hold it (dp
// rank 0 of every (tp, pp) position), for the export and for tests that compare
// layouts. Works for parameters and gradients alike (same named layout).
#pragma once

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"

namespace parallel {

// Collective over the world. `full` (rank 0 only; null elsewhere) holds the
// whole model in whole_model_param_names order, its word embeddings padded as
// the run's.
void gather_to_rank0(ProcessGroups& groups, const model::GptConfig& config,
                     const model::GptParams& local, const model::GptParams* full);

}  // namespace parallel
