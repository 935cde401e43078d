// The commands that set up a launch or a device before they run, as main's command table calls
// them: each takes the arguments after its name (and argc/argv for MPI) and returns the exit
// status. The others are their libraries' own (prepare-data, export, hf-config, report).
#pragma once

#include <string>
#include <vector>

namespace trainer::commands {

// `trainer train`: one rank, or every rank under mpirun; errors end the job (device_setup.h).
int train(int argc, char** argv, const std::vector<std::string>& args);
// `trainer plan`; under mpirun every rank joins the link measurement and rank 0 plans.
int plan(int argc, char** argv, const std::vector<std::string>& args);
// `trainer calibrate`: one process on the config's device, or under mpirun every rank side by
// side over the calibration groups, rank 0 writing the profile.
int calibrate(int argc, char** argv, const std::vector<std::string>& args);
// `trainer generate`, on the first GPU with --device cuda.
int generate(const std::vector<std::string>& args);

}  // namespace trainer::commands
