// The `trainer` command table: train, plan, calibrate, prepare-data, generate, export, hf-config,
// report, --help (also after a command), --version. Each command lives in trainer/commands/ or in
// its library; a command that launches ranks prints errors with a rank prefix and ends the whole
// job, so no rank hangs (trainer/commands/device_setup.h).
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/openmp_wait.h"
#include "trainer/commands/commands.h"
#include "trainer/commands/export_command.h"
#include "trainer/commands/report.h"
#include "trainer/data/prepare_data.h"
#include "trainer/generate/generate_command.h"
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
  if (args[0] == "train") return trainer::commands::train(argc, argv, rest);
  try {
    if (args[0] == "plan") return trainer::commands::plan(argc, argv, rest);
    if (args[0] == "calibrate") return trainer::commands::calibrate(argc, argv, rest);
    if (args[0] == "prepare-data") return trainer::run_prepare_data(rest);
    if (args[0] == "generate") return trainer::commands::generate(rest);
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
