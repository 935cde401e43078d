// What a training run plans with before it builds anything (docs/planning.md): the time profile
// (train.time_profile, or a calibration at startup when recompute.auto plans by time and none
// is given: world rank 0 measures on its device, or on CPUs every rank side by side over real
// tensor/context groups, and every rank plans from rank 0's profile, so every rank chooses the
// same plan; a restart reuses the run directory's profile when it was measured on this device at
// these shapes), the resolved recompute.auto plan, and the predicted step time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/planning/rank_memory.h"
#include "trainer/planning/stage_choice.h"
#include "trainer/planning/step_time.h"
#include "trainer/planning/time_profile.h"

namespace trainer {

struct RunTiming {
  std::optional<TimeProfile> profile;    // the profile the run plans and predicts with, if any
  std::string origin;                    // its path, or "calibrated at startup"
  bool calibrated_here = false;          // measured by this run (written to the run directory)
  std::vector<ChoiceProof> stage_proof;  // recompute.auto's, per stage (auto_plan.h)
};

// A training run as planned, before anything of it is built: what `trainer train` hands the
// Trainer.
struct RunPlan {
  Config config;                // as run: recompute.auto replaced by its plan, validated
  bool recompute_auto = false;  // the config asked for recompute.auto (the log says how it went)
  RunTiming timing;             // the profile it planned with and predicts with
  RankMemory memory;            // this rank's every category over a step (the meta replay)
  // The step-time model's step on the logging rank (world rank 0; elsewhere none), and whether
  // its profile timed attention with the run's documents (Note [Timed documents]).
  std::optional<StepPrediction> step;
  bool timed_with_documents = false;
};

// Plans `config` on this rank (collective over the world when it calibrates): the profile,
// recompute.auto's plan, the checks of the planned config against the launch (ConfigError),
// the memory replay of this rank and, on the logging rank, the predicted step.
RunPlan plan_run(const Config& config, parallel::ProcessGroups& groups,
                 runtime::Allocator& allocator);

// Where a run keeps the profile it calibrated: <output.dir>/time_profile.json.
std::string run_profile_path(const Config& config);

// The cost model of `timing`: its profile, or the roofline of default_rates(config).
CostModel run_cost_model(const Config& config, const RunTiming& timing);

}  // namespace trainer
