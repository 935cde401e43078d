// `trainer plan --sweep KEY=v1,v2,...`: the predicted per-rank peak of a config as one key varies,
// under no recompute, selective core_attn, full recompute and the planner's choice (with a
// budget), and for each value the planner's memory-recompute frontier beside the Megatron
// presets. Printed as a table; written as PREFIX.csv and PREFIX.json (scripts/plot.py sweep).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace trainer {

struct SweepArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string sweep;       // KEY=v1,v2,...
  std::string out_prefix;  // PREFIX.csv, PREFIX.json
};

void run_plan_sweep(const SweepArgs& args, std::ostream& out);

}  // namespace trainer
