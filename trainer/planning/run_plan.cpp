// The startup's planning: read or calibrate, share, plan.
#include "trainer/planning/run_plan.h"

#include "trainer/planning/auto_plan.h"
#include "trainer/planning/calibrate.h"

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

}  // namespace

Config plan_run(const Config& config, parallel::ProcessGroups& groups,
                runtime::Allocator& allocator, RunTiming& timing) {
  const TrainConfig& t = config.train;
  if (!t.time_profile.empty()) {
    timing.profile = read_time_profile(t.time_profile);
    timing.origin = t.time_profile;
  } else if (config.recompute.automatic && t.plan_objective == PlanObjective::time) {
    std::optional<TimeProfile> mine;
    if (groups.world_rank == 0) mine = calibrate(config, allocator);
    timing.profile = groups.world_size() > 1 ? share(mine, *groups.world) : *mine;
    timing.origin = "calibrated at startup";
    timing.calibrated_here = true;
  }
  if (!config.recompute.automatic) return config;
  if (t.plan_objective == PlanObjective::flops) return with_auto_plan(config, {});
  const CostModel costs = run_cost_model(config, timing);
  return with_auto_plan(config, {&costs, default_links(config)});
}

CostModel run_cost_model(const Config& config, const RunTiming& timing) {
  if (timing.profile) return CostModel({}, timing.profile, timing.origin);
  return CostModel(default_rates(config), std::nullopt, "");
}

}  // namespace trainer
