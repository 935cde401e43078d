// `trainer plan --config F.yaml [--set k=v ...]`: resolves the recompute config
// into per-layer plans for every pipeline stage and prints them with the
// memory model's predictions, without allocating a model or training.
#pragma once

#include <iosfwd>
#include <string>

#include "trainer/config/config.h"

namespace trainer {

// Writes the plan tables of every pipeline stage to `out`.
void print_plan(const Config& config, const std::string& source, std::ostream& out);

}  // namespace trainer
