// Predicted communication of one training step on one rank: the payload bytes
// its communicators are handed (the convention of Communicator::payload_bytes:
// a collective's input buffer, a message's bytes), from the same layer shapes,
// plan and schedule the step runs with. Compared with the measured count per step.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layer_stash.h"
#include "recompute/executor.h"
#include "trainer/config/config.h"

namespace trainer {

// `chunks`: this rank's model chunks in order; `dims`: their layer shapes.
int64_t predict_step_comm_bytes(const Config& config, const model::LayerDims& dims,
                                const std::vector<const recompute::ChunkExecutor*>& chunks,
                                const model::GptParams& params, int64_t world_size);

}  // namespace trainer
