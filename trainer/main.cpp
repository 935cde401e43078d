// The `trainer` command: train, plan, calibrate, prepare-data, generate, export, report, --help
// (also after a command), --version. Errors are printed with a rank prefix and end the whole job,
// so no rank hangs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/core/process_groups.h"
#ifdef TRAINER_WITH_CUDA
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device.h"
#endif
#include "runtime/error.h"
#include "runtime/openmp_wait.h"
#include "trainer/config/config.h"
#include "trainer/data/prepare_data.h"
#include "trainer/export_command.h"
#include "trainer/generate/generate_command.h"
#include "trainer/planning/calibrate.h"
#include "trainer/planning/plan_command.h"
#include "trainer/report.h"
#include "trainer/run/train.h"
#include "trainer/util/version.h"

namespace {

// Each command's usage: `trainer CMD --help` prints its entry, `trainer --help` all of them.
struct CommandUsage {
  const char* name;
  const char* text;  // the synopsis lines, then the description indented by 8
};

constexpr CommandUsage kCommandUsages[] = {
    {"train",
     "  train --config FILE.yaml [--set a.b=value ...] [--resume [auto|STEP_DIR]]\n"
     "        Train a GPT as the config says (launch with mpirun -np N). --resume continues\n"
     "        from the latest checkpoint under checkpoint.dir (or the given step directory).\n"
     "        SIGTERM/SIGINT: finish the step, write a checkpoint, exit 0; twice: exit now.\n"
     "        Exit 3: a target gate stopped the run (targets.action checkpoint_and_stop);\n"
     "        exit 4: the divergence guard stopped it (train.guard.max_rewinds).\n"},
    {"plan",
     "  plan --config FILE.yaml [--set a.b=value ...] [--budget-gib X] [--emit-yaml]\n"
     "       [--sweep KEY=v1,v2,... [--out PREFIX]] [--timeline PREFIX]\n"
     "        Print the recompute plan and the predicted memory of every rank, by category;\n"
     "        needs no dataset and no device. --budget-gib plans the least recompute that\n"
     "        fits; --emit-yaml prints the plan as a recompute: section; --sweep writes\n"
     "        PREFIX.csv and PREFIX.json (default prefix plan_sweep); --timeline writes\n"
     "        every rank's predicted memory timeline of one step as PREFIX_rank<R>.json and\n"
     "        PREFIX_rank<R>.trace.json (Perfetto).\n"
     "  plan --config FILE.yaml --search --ranks N --budget-gib X [--top K] [--emit-yaml]\n"
     "       [--profile P.json]\n"
     "       [--link-gbps intra=GBPS,inter=GBPS,reduce=GBPS,ranks-per-node=N,latency-us=US]\n"
     "        Search the parallel layouts of N ranks (tensor, context, pipeline, data,\n"
     "        virtual pipeline, sequence parallel, micro batch, distributed optimizer): plan\n"
     "        recompute under X GiB per rank for each and print the K (default 10) fastest\n"
     "        by predicted step time; --emit-yaml prints the best as a complete config.\n"
     "        --profile may be repeated: each prices the layouts with its rank shapes.\n"},
    {"calibrate",
     "  calibrate --config FILE.yaml [--set a.b=value ...] [--out P.json] [--repeats N]\n"
     "            [--min-seconds S]\n"
     "        Time, on the config's device, one rank's layer forward, backward and every\n"
     "        recompute choice, the embedding and head, the optimizer, and the device's\n"
     "        GEMM rate and copy bandwidth; write them as a time profile for\n"
     "        train.time_profile and `trainer plan --profile` (default time_profile.json).\n"
     "        Medians over at least N rounds (default 5) spanning S seconds (default 2).\n"
     "        Under mpirun, a multiple of tensor x context ranks calibrate side by side and\n"
     "        the tensor/context collectives are measured over real peers.\n"},
    {"prepare-data",
     "  prepare-data --input FILE ... --output-prefix PREFIX [--append-eod] [--split-lines]\n"
     "  prepare-data --synthetic --output-prefix PREFIX [--num-tokens N] [--seed S]\n"
     "        Write a Megatron indexed dataset (.bin/.idx); see `trainer prepare-data --help`.\n"},
    {"generate",
     "  generate --model RUN_DIR | --checkpoint STEP_DIR [--prompt TEXT] [--max-new-tokens N]\n"
     "           [--temperature T] [--top-k K] [--seed S] [tokenizer flags]\n"
     "        Sample text from a trained model on one process; see `trainer generate --help`.\n"},
    {"export",
     "  export --checkpoint STEP_DIR --output DIR [--dtype float32|bfloat16]\n"
     "        Write a checkpoint of any parallel layout as a Hugging Face model (GPT-2,\n"
     "        Llama, Qwen2 or Qwen3); see `trainer export --help`.\n"},
    {"hf-config",
     "  hf-config CONFIG_JSON\n"
     "        Print the model: section of a Hugging Face config.json (GPT-2, Llama, Mistral,\n"
     "        Qwen2, Qwen3); see `trainer hf-config --help`.\n"},
    {"report",
     "  report RUN_DIR [--plot-script scripts/plot.py] [--python PYTHON]\n"
     "        Write RUN_DIR/report.md from its metrics.jsonl and events.jsonl, with PNG plots in\n"
     "        RUN_DIR/plots when a python3 with matplotlib is there.\n"},
};

std::string usage() {
  std::string text = "usage: trainer <command> [options]\n\ncommands:\n";
  for (const CommandUsage& command : kCommandUsages) text += command.text;
  return text + "  --help, --version\n\n`trainer <command> --help` prints one command's usage.\n";
}

// `trainer NAME --help`: the command's own usage (prepare-data has a longer one of its own).
std::optional<std::string> command_usage(const std::string& name) {
  if (name == "prepare-data") return trainer::prepare_data_usage();
  if (name == "generate") return trainer::generate_usage();
  if (name == "export") return trainer::export_usage();
  if (name == "hf-config") return trainer::hf_config_usage();
  for (const CommandUsage& command : kCommandUsages)
    if (name == command.name) return "usage: trainer" + std::string(command.text).substr(1);
  return std::nullopt;
}

bool asks_for_help(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;  // empty: start fresh; "auto" or a step directory
};

// --config FILE and --set overrides, shared by `train` and `plan`.
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

// Whether a launcher (mpirun, srun) started this process: then MPI is set up;
// a plain `trainer train` runs as one rank without the MPI runtime.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

// Prints the error with the rank and, when other ranks exist, ends the whole job at once.
void report_and_abort(const std::exception& error, int world_rank, int world_size) {
  std::fprintf(stderr, "[rank %d] error: %s\n", world_rank, error.what());
  std::fflush(stderr);
  if (world_size > 1) parallel::abort_job(1);
}

// The process's device for the run: on cuda, a CUDA context and its caching allocator; the
// host allocator otherwise. Declared before the groups, so it outlives their communicators
// (its members go in reverse: the context, then the allocator).
struct RunDevice {
  std::unique_ptr<runtime::Allocator> allocator;
#ifdef TRAINER_WITH_CUDA
  std::unique_ptr<runtime::cuda::CudaContext> cuda;
#endif
};

#ifdef TRAINER_WITH_CUDA
// How many different GPUs the job's ranks use, by UUID (collective over the world group): NCCL
// needs a GPU per rank, and all ranks must choose alike.
int64_t count_distinct_gpus(parallel::ProcessGroups& groups) {
  const auto uuid = runtime::cuda::current_device_uuid();
  const size_t world_size = static_cast<size_t>(groups.world_size());
  std::vector<unsigned char> uuids(uuid.size() * world_size);
  groups.world->all_gather(uuids.data(), uuid.data(), static_cast<int64_t>(uuid.size()),
                           runtime::DType::u8);
  std::set<std::string> distinct;
  for (size_t r = 0; r < world_size; ++r)
    distinct.emplace(reinterpret_cast<const char*>(uuids.data()) + r * uuid.size(), uuid.size());
  return static_cast<int64_t>(distinct.size());
}

// The GPU of `local_rank`, with its context, the CUDA backend registered on it, and its caching
// allocator.
void set_up_gpu(int local_rank, RunDevice& device) {
  runtime::cuda::select_device_for_local_rank(local_rank);
  device.cuda = std::make_unique<runtime::cuda::CudaContext>();
  runtime::cuda::register_cuda_backend(*device.cuda);
  device.allocator = std::make_unique<runtime::cuda::CudaAllocator>();
  device.cuda->use_allocator(device.allocator.get());  // declared first: outlives the context
}

// This rank's GPU: selected by local rank, the CUDA backend registered on its context, and
// device tensors communicated over NCCL when every rank has a GPU of its own
// (resolve_comm_backend decides, alike on all ranks), else staged through host memory by MPI.
void set_up_cuda(const trainer::Config& config, parallel::ProcessGroups& groups, int local_rank,
                 RunDevice& device) {
  set_up_gpu(local_rank, device);
  const int64_t world_size = groups.world_size();
  if (trainer::resolve_comm_backend(config, world_size, count_distinct_gpus(groups)) ==
      parallel::CommBackend::nccl) {
    parallel::use_nccl_for_device_tensors(groups, device.cuda->stream());
    if (groups.is_logging_rank()) std::cout << "communication: NCCL for device tensors\n";
  } else if (world_size > 1 && groups.is_logging_rank()) {
    std::cout << "communication: MPI, device tensors staged through host memory\n";
  }
}
#endif

// Fills `device` for train.device: this rank's GPU on cuda (check_supported has rejected cuda
// in a build without it), the host allocator on cpu.
void set_up_device([[maybe_unused]] const trainer::Config& config,
                   [[maybe_unused]] parallel::ProcessGroups& groups,
                   [[maybe_unused]] int local_rank, RunDevice& device) {
#ifdef TRAINER_WITH_CUDA
  if (config.train.device == trainer::Device::cuda) set_up_cuda(config, groups, local_rank, device);
#endif
  if (!device.allocator) device.allocator = std::make_unique<runtime::CpuAllocator>();
}

// `trainer generate`, on the first GPU with --device cuda.
int generate_command(const std::vector<std::string>& args) {
  const trainer::GenerateOptions options = trainer::parse_generate_options(args);
  if (options.device == trainer::Device::cpu) return trainer::run_generate(options, std::cout);
#ifdef TRAINER_WITH_CUDA
  RunDevice device;
  set_up_gpu(0, device);
  return trainer::run_generate(options, std::cout, device.allocator.get());
#else
  throw runtime::InputError("generate: --device cuda, but this trainer was built without CUDA");
#endif
}

int run_train(int argc, char** argv, const std::vector<std::string>& args) {
  std::optional<parallel::MpiRuntime> mpi;
  if (launched_by_mpi()) mpi.emplace(&argc, &argv);
  const int world_rank = mpi ? mpi->world_rank() : 0, world_size = mpi ? mpi->world_size() : 1;
  runtime::set_error_rank(world_rank);
  int exit_status = 0;
  try {
    const TrainArgs train_args = parse_train_args(args, "train");
    const trainer::Config config =
        trainer::load_config(train_args.config_path, train_args.overrides);
    trainer::validate_launch(config, world_size);
    trainer::check_supported(config);
    RunDevice device;  // before the groups: it outlives their communicators
    parallel::ProcessGroups groups = mpi ? parallel::ProcessGroups::from_mpi(config.parallel)
                                         : parallel::ProcessGroups::single();
    set_up_device(config, groups, mpi ? mpi->local_rank() : 0, device);
    runtime::Allocator& allocator = *device.allocator;
    std::ostringstream discard;
    std::ostream& log = groups.is_logging_rank() ? std::cout : discard;
    try {
      trainer::Trainer trainer(config, groups, allocator, log);
      const bool resumed = !train_args.resume.empty() && trainer.resume(train_args.resume);
      if (!resumed && !config.train.init_from.empty()) trainer.init_from(config.train.init_from);
      exit_status = trainer::exit_code(trainer.run().stop);
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

// `trainer plan`; under mpirun every rank joins the link measurement and rank 0 plans.
int run_plan(int argc, char** argv, const std::vector<std::string>& args) {
  if (!launched_by_mpi()) return trainer::run_plan_command(args, std::cout);
  parallel::MpiRuntime mpi(&argc, &argv);
  runtime::set_error_rank(mpi.world_rank());
  try {
    parallel::ParallelConfig world;
    world.data = mpi.world_size();
    parallel::ProcessGroups groups = parallel::ProcessGroups::from_mpi(world);
    return trainer::run_plan_command(args, std::cout, groups.world.get());
  } catch (const std::exception& e) {
    report_and_abort(e, mpi.world_rank(), mpi.world_size());
    return 1;
  }
}

// `trainer calibrate`: one process on the config's device, or under mpirun every rank, side by
// side over the calibration groups, rank 0 writing the profile.
int run_calibrate(int argc, char** argv, const std::vector<std::string>& args) {
  const trainer::CalibrateArgs parsed = trainer::parse_calibrate_args(args);
  const trainer::Config config =
      trainer::load_config(parsed.config_path, parsed.overrides, trainer::ConfigUse::plan);
  trainer::check_supported(config);
  if (!launched_by_mpi()) {
    RunDevice device;
    parallel::ProcessGroups groups = parallel::ProcessGroups::single();
    set_up_device(config, groups, 0, device);
    return trainer::calibrate_command(parsed, config, *device.allocator, std::cout);
  }
  parallel::MpiRuntime mpi(&argc, &argv);
  runtime::set_error_rank(mpi.world_rank());
  try {
    RunDevice device;  // before the groups: it outlives their communicators
    parallel::ProcessGroups groups = trainer::calibration_groups(config, mpi.world_size());
    set_up_device(config, groups, mpi.local_rank(), device);
    std::ostringstream discard;
    return trainer::calibrate_command(parsed, config, *device.allocator,
                                      mpi.world_rank() == 0 ? std::cout : discard, &groups);
  } catch (const std::exception& e) {
    report_and_abort(e, mpi.world_rank(), mpi.world_size());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(usage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("trainer %s (git %s)\n", trainer::version(), trainer::git_revision());
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (const std::optional<std::string> text = command_usage(args[0]); text && asks_for_help(rest)) {
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (args[0] == "train") return run_train(argc, argv, rest);
  try {
    if (args[0] == "plan") return run_plan(argc, argv, rest);
    if (args[0] == "calibrate") return run_calibrate(argc, argv, rest);
    if (args[0] == "prepare-data") return trainer::run_prepare_data(rest);
    if (args[0] == "generate") return generate_command(rest);
    if (args[0] == "export")
      return trainer::run_export(trainer::parse_export_options(rest), std::cout);
    if (args[0] == "hf-config") return trainer::run_hf_config(rest, std::cout);
    if (args[0] == "report")
      return trainer::run_report(trainer::parse_report_args(rest), std::cout);
    throw runtime::InputError("unknown command '" + args[0] + "'\n" + usage());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
