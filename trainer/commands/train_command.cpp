// `trainer train`: the arguments, the launch, the device, the plan, the Trainer.
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/core/process_groups.h"
#include "runtime/error.h"
#include "trainer/commands/commands.h"
#include "trainer/commands/device_setup.h"
#include "trainer/config/config.h"
#include "trainer/planning/run_plan.h"
#include "trainer/run/train.h"

namespace trainer::commands {
namespace {

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;  // empty: start fresh; "auto" or a step directory
};

// --config FILE, --set overrides and --resume [auto|STEP_DIR].
TrainArgs parse_train_args(const std::vector<std::string>& args, const std::string& command) {
  TrainArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw runtime::InputError(command + ": " + a + " needs a value");
      return args[++i];
    };
    if (a == "--config")
      parsed.config_path = value();
    else if (a == "--set")
      parsed.overrides.push_back(value());
    else if (a.rfind("--set=", 0) == 0)
      parsed.overrides.push_back(a.substr(6));
    else if (a == "--resume") {
      const bool has_value = i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0;
      parsed.resume = has_value ? args[++i] : "auto";
    } else
      throw runtime::InputError(command + ": unknown argument '" + a + "' (see trainer " + command +
                                " --help)");
  }
  if (parsed.config_path.empty())
    throw runtime::InputError(command + ": --config FILE is required");
  return parsed;
}

}  // namespace

int train(int argc, char** argv, const std::vector<std::string>& args) {
  std::optional<parallel::MpiRuntime> mpi;
  if (launched_by_mpi()) mpi.emplace(&argc, &argv);
  const int world_rank = mpi ? mpi->world_rank() : 0, world_size = mpi ? mpi->world_size() : 1;
  runtime::set_error_rank(world_rank);
  int exit_status = 0;
  try {
    const TrainArgs train_args = parse_train_args(args, "train");
    const Config config = load_config(train_args.config_path, train_args.overrides);
    validate_launch(config, world_size);
    check_supported(config);
    RunDevice device;  // before the groups: it outlives their communicators
    parallel::ProcessGroups groups = mpi ? parallel::ProcessGroups::from_mpi(config.parallel)
                                         : parallel::ProcessGroups::single();
    device.set_up(config, groups, mpi ? mpi->local_rank() : 0);
    runtime::Allocator& allocator = device.allocator();
    std::ostringstream discard;
    std::ostream& log = groups.is_logging_rank() ? std::cout : discard;
    try {
      // Planned first (the profile, recompute.auto's plan, the memory replay, the predicted
      // step), then built and run.
      const RunPlan plan = plan_run(config, groups, allocator);
      Trainer trainer(plan, groups, allocator, log);
      const bool resumed = !train_args.resume.empty() && trainer.resume(train_args.resume);
      if (!resumed && !config.train.init_from.empty()) trainer.init_from(config.train.init_from);
      exit_status = exit_code(trainer.run().stop);
    } catch (const std::exception& e) {
      // Handled while the groups and the device are alive: with other ranks waiting on this
      // one, tearing down communicators or freeing device memory could block for ever.
      report_and_abort(e, world_rank, world_size);
      return 1;
    }
  } catch (const std::exception& e) {
    report_and_abort(e, world_rank, world_size);
    return 1;
  }
  return exit_status;
}

}  // namespace trainer::commands
