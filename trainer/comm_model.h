// Predicted communication of one training step on one rank: the payload bytes
// its communicators are handed (the convention of Communicator::payload_bytes:
// a collective's input buffer, a message's bytes), from the same layer shapes,
// plan and schedule the step runs with. Compared with the measured count per step.
#pragma once

#include <cstdint>

#include "model/gpt_params.h"
#include "trainer/config/config.h"
#include "trainer/stage_setup.h"

namespace trainer {

// `setup`: this rank's stage; `params`: the parameters it holds (their layout sets the sizes
// of the gradient reductions).
int64_t predict_step_comm_bytes(const Config& config, const StageSetup& setup,
                                const model::GptParams& params);

// The part of it that goes around the context ring (ring attention; 0 without context
// parallelism).
int64_t predict_step_context_bytes(const StageSetup& setup);

}  // namespace trainer
