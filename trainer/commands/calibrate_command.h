// `trainer calibrate`: its arguments, and the profile it writes and prints (the measuring is
// trainer/planning/calibrate.h's).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/planning/calibrate.h"

namespace trainer {

// `trainer calibrate --config F.yaml [--set k=v ...] [--out P.json] [--repeats N]
// [--min-seconds S]`; commands::calibrate sets up the config's device (and under mpirun the
// calibration groups) and calls calibrate_command.
struct CalibrateArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string out_path = "time_profile.json";
  CalibrationOptions options;
};
CalibrateArgs parse_calibrate_args(const std::vector<std::string>& args);

// Calibrates, and on rank 0 writes the profile to args.out_path and prints what it measured to
// `out`; returns 0. `peers` as calibrate's.
int calibrate_command(const CalibrateArgs& args, const Config& config,
                      runtime::Allocator& allocator, std::ostream& out,
                      parallel::ProcessGroups* peers = nullptr);

}  // namespace trainer
