// `trainer plan`: resolves the recompute config (or plans one under a budget) into per-layer
// plans for every pipeline stage and prints them with the memory model's predictions, per layer
// and per memory category, without a dataset, a device or a launch. Sweeps vary one config key
// and write the predictions as CSV and JSON (scripts/plot.py draws them).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "parallel/core/communicator.h"
#include "trainer/config/config.h"

namespace trainer {

// Writes the plan tables of every pipeline stage to `out`.
void print_plan(const Config& config, const std::string& source, std::ostream& out);

// `trainer plan ARGS...` (after the word plan); returns the exit code. Under mpirun (`world` of
// more than one rank) the ranks measure their links for the comm model (unless --link-gbps
// states them) and rank 0 alone plans and prints.
int run_plan_command(const std::vector<std::string>& args, std::ostream& out,
                     parallel::Communicator* world = nullptr);

}  // namespace trainer
