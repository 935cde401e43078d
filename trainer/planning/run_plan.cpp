// The startup's planning: read or calibrate, share, plan.
#include "trainer/planning/run_plan.h"

#include <filesystem>

#include "runtime/error.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/planning/calibrate.h"
#include "trainer/planning/cost_model.h"

namespace trainer {
namespace {

// Rank 0's profile on every rank: its JSON's length, then its bytes, over the world.
TimeProfile share(const std::optional<TimeProfile>& mine, parallel::Communicator& world) {
  std::string text = mine ? time_profile_json(*mine) : std::string();
  int64_t length = static_cast<int64_t>(text.size());
  world.broadcast(&length, sizeof length, 0);
  text.resize(static_cast<size_t>(length));
  world.broadcast(text.data(), length, 0);
  return parse_time_profile(text, "the profile world rank 0 calibrated");
}

// The run directory's profile from an earlier start of this run, when it was measured on this
// device at this run's shapes by as many ranks side by side (a resumed run plans as it did).
std::optional<TimeProfile> earlier_profile(const Config& config,
                                           const runtime::Allocator& allocator,
                                           const std::string& path, int64_t ranks) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  try {
    TimeProfile profile = read_time_profile(path);
    const StageSetup setup = make_stage_setup(config, 0, 0);
    if (profile.shapes == profile_shape_key(config, setup) &&
        profile.device == calibration_device(config, allocator) && profile.ranks == ranks)
      return profile;
  } catch (const runtime::InputError&) {
  }
  return std::nullopt;
}

// `config` with recompute.auto replaced by its plan; fills `timing` (collective over the world
// when it calibrates).
Config plan_config(const Config& config, parallel::ProcessGroups& groups,
                   runtime::Allocator& allocator, RunTiming& timing) {
  const TrainConfig& t = config.train;
  if (!t.time_profile.empty()) {
    timing.profile = read_time_profile(t.time_profile);
    timing.origin = t.time_profile;
  } else if (config.recompute.automatic && t.plan_objective == PlanObjective::time) {
    const std::string path = run_profile_path(config);
    // On CPUs every rank calibrates side by side over real tensor/context groups (calibrate.h):
    // the host's cores are shared as in the run, and the collectives are measured.
    const bool side_by_side = groups.world_size() > 1 && t.device == Device::cpu;
    std::optional<TimeProfile> mine;
    bool reused = false;
    if (groups.world_rank == 0) {
      mine = earlier_profile(config, allocator, path, side_by_side ? groups.world_size() : 1);
      reused = mine.has_value();
    }
    if (groups.world_size() > 1) groups.world->broadcast(&reused, sizeof reused, 0);
    CalibrationOptions options;
    if (!reused && (side_by_side || groups.world_rank == 0))
      options.document_starts = calibration_documents(config);
    if (!reused && side_by_side) {
      parallel::ProcessGroups peers = calibration_groups(config, groups.world_size());
      TimeProfile measured = calibrate(config, allocator, options, &peers);
      if (groups.world_rank == 0) mine = std::move(measured);
    } else if (!reused && groups.world_rank == 0) {
      mine = calibrate(config, allocator, options);
    }
    if (groups.world_size() > 1) {
      timing.profile = share(mine, *groups.world);
    } else {
      timing.profile = *mine;
    }
    timing.origin = reused ? path + " (calibrated at an earlier start)" : "calibrated at startup";
    timing.calibrated_here = !reused;
  }
  if (!config.recompute.automatic) return config;
  if (t.plan_objective == PlanObjective::flops)
    return with_auto_plan(config, {}, &timing.stage_proof);
  const CostModel costs = run_cost_model(config, timing);
  return with_auto_plan(config, {&costs, default_links(config)}, &timing.stage_proof);
}

}  // namespace

RunPlan plan_run(const Config& config, parallel::ProcessGroups& groups,
                 runtime::Allocator& allocator) {
  RunPlan plan;
  plan.recompute_auto = config.recompute.automatic;
  plan.config = plan_config(config, groups, allocator, plan.timing);
  validate_config(plan.config);
  validate_launch(plan.config, groups.world_size());
  plan.memory = predict_rank_memory(plan.config, groups.world_rank);
  if (groups.is_logging_rank()) {
    const CostModel costs = run_cost_model(plan.config, plan.timing);
    plan.step = predict_step_time(plan.config, costs, default_links(plan.config));
    const StageSetup setup =
        make_stage_setup(plan.config, groups.coordinates.pp, groups.coordinates.tp);
    plan.timed_with_documents =
        plan.config.data.reset_attention_mask && costs.matches(plan.config, setup);
  }
  return plan;
}

std::string run_profile_path(const Config& config) {
  return config.output.dir + "/time_profile.json";
}

CostModel run_cost_model(const Config& config, const RunTiming& timing) {
  if (timing.profile) return CostModel({}, timing.profile, timing.origin);
  return CostModel(default_rates(config), std::nullopt, "");
}

}  // namespace trainer
