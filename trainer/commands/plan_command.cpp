// The plan tables: per layer its entry, checkpoint group, kept and rebuilt bytes; per stage the
// predicted activation peak and recompute FLOPs; per rank every memory category against the
// budget. And the command's arguments: a budget plans automatically, --emit-yaml prints the
// plan as a config section, --sweep varies a key (trainer/planning/plan_sweep.h).
#include "trainer/commands/plan_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <sstream>

#include "model/flops.h"
#include "recompute/memory_model.h"
#include "runtime/device_scratch.h"
#include "runtime/error.h"
#include "runtime/meta_device.h"
#include "trainer/commands/commands.h"
#include "trainer/commands/device_setup.h"
#include "trainer/engine/stage_setup.h"
#include "trainer/observe/memory_timeline_files.h"
#include "trainer/observe/metrics.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/planning/layout_search.h"
#include "trainer/planning/link_measure.h"
#include "trainer/planning/plan_sweep.h"
#include "trainer/planning/rank_memory.h"
#include "trainer/planning/step_time.h"
#include "trainer/util/format_bytes.h"

namespace trainer {

namespace {

// The payload a rank of the stage hands its communicators per step, and the context ring's share.
void print_stage_comm(const Config& config, const StageSetup& setup, std::ostream& out) {
  const RankMemory rank = predict_rank_memory(config, stage_rank(config.parallel, setup.stage));
  out << "  communication per step (per rank of this stage): "
      << format_bytes(rank.comm_payload_bytes +
                      rank_metrics_payload_bytes(config.parallel.world_size()));
  const int64_t cp = config.parallel.context;
  if (cp > 1) {
    out << ", of which the context ring " << format_bytes(rank.context_payload_bytes) << " (cp "
        << cp << ": " << setup.dims.seq << " of " << config.model.seq_length
        << " positions per rank)";
  }
  out << "\n";
}

// One stage's table: its layers with their entries and bytes, then the stage's totals.
void print_stage(const Config& config, const StageSetup& setup, std::ostream& out) {
  const int64_t stage = setup.stage, pipeline = config.parallel.pipeline;
  const recompute::RecomputePlan& plan = setup.plan;
  const model::LayerDims& dims = setup.dims;
  // The stage's layers as one chunk, one microbatch: the per-layer bytes of the table.
  const auto memory =
      recompute::predict_activation_memory(config.model, dims, plan, 1, stage == 0,
                                           stage == pipeline - 1, config.data.document_starts());
  const int64_t in_flight = pipeline == 1 ? 1 : std::min(pipeline - stage, setup.num_microbatches);
  out << "\nstage " << stage << " (1F1B: up to " << in_flight << " microbatch"
      << (in_flight > 1 ? "es" : "") << " in flight)\n";
  out << "  layer | entry                                   | group |"
         "         kept |      rebuilt\n";
  char line[256];
  int64_t local = 0;
  for (const StageChunk& chunk : setup.chunks) {
    for (int64_t i = 0; i < chunk.layers.count; ++i, ++local) {
      const size_t li = static_cast<size_t>(local);
      const recompute::LayerMemory& lm = memory.layers[li];
      const bool full = plan.is_full(local);
      const std::string group = full ? std::to_string(plan.group[li]) : "-";
      const int64_t rebuilt =
          full ? model::stash_kept_bytes(model::layer_stash_spec(dims, {})) : lm.rebuilt;
      std::snprintf(line, sizeof line, "  %5lld | %-39s | %5s | %12s | %12s\n",
                    static_cast<long long>(chunk.layers.first + i),
                    model::to_string(plan.layers[li]).c_str(), group.c_str(),
                    format_bytes(lm.kept + lm.checkpoint).c_str(), format_bytes(rebuilt).c_str());
      out << line;
    }
  }
  const int64_t model_flops = 3 * plan.num_layers() * setup.layer_flops.total();
  const int64_t recompute_flops = setup.recompute_flops_per_step / setup.num_microbatches;
  std::snprintf(
      line, sizeof line,
      "  embedding %s, head %s%s; per microbatch: forward end %s, backward peak %s\n"
      "  predicted activation peak (per rank of this stage): %s\n"
      "  recompute: %.3f GFLOP per microbatch (%.1f%% of the layers' model FLOPs)\n",
      format_bytes(memory.embedding).c_str(), format_bytes(memory.head).c_str(),
      memory.documents > 0 ? (", document starts " + format_bytes(memory.documents)).c_str() : "",
      format_bytes(memory.forward_end).c_str(), format_bytes(memory.backward_peak).c_str(),
      format_bytes(setup.predicted_activation_peak).c_str(),
      static_cast<double>(recompute_flops) / 1e9,
      model_flops > 0
          ? 100.0 * static_cast<double>(recompute_flops) / static_cast<double>(model_flops)
          : 0.0);
  out << line;
  print_stage_comm(config, setup, out);
}

// Every memory category per rank of each stage, the total, and the budget when there is one.
void print_rank_memory(const Config& config, std::ostream& out) {
  const PlanSummary summary = summarize_plan(config);
  out << "\nmemory per rank (peak of each category over a step; total = their sum"
      << (config.train.device == Device::cuda ? " + CUDA context and library workspaces" : "")
      << ")\n  stage |";
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    char head[32];
    std::snprintf(head, sizeof head, " %10s |", std::string(runtime::category_name(c)).c_str());
    out << head;
  }
  out << "   overhead |      total\n";
  char cell[64];
  for (size_t stage = 0; stage < summary.stage_memory.size(); ++stage) {
    const RankMemory& m = summary.stage_memory[stage];
    std::snprintf(cell, sizeof cell, "  %5zu |", stage);
    out << cell;
    for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
      std::snprintf(cell, sizeof cell, " %10s |", format_bytes(m[c]).c_str());
      out << cell;
    }
    std::snprintf(cell, sizeof cell, " %10s | %10s\n", format_bytes(m.device_overhead).c_str(),
                  format_bytes(m.total()).c_str());
    out << cell;
  }
  if (config.train.device == Device::cuda && runtime::device_scratch_sizes() == nullptr) {
    out << "  workspace leaves out the CUDA operators' scratch buffer: its size needs the device\n"
           "  (`trainer train` includes it in the prediction it checks)\n";
  }
  const int64_t budget = budget_bytes(config.train.memory_budget_gib);
  if (budget > 0) {
    out << "  largest total " << format_bytes(summary.peak) << " (" << summary.peak
        << " bytes) against train.memory_budget_gib " << config.train.memory_budget_gib << " ("
        << format_bytes(budget) << "): "
        << (summary.peak <= budget
                ? "fits"
                : "DOES NOT FIT, " + format_bytes(summary.peak - budget) + " over")
        << "\n";
  }
  const int64_t target = budget_bytes(config.targets.max_memory_gib);
  if (target > 0) {  // the gate the run will check, checked now against the prediction
    out << "  targets.max_memory_gib " << config.targets.max_memory_gib << " ("
        << format_bytes(target) << "): "
        << (summary.peak <= target
                ? "met by the prediction"
                : "MISSED by the prediction, " + format_bytes(summary.peak - target) + " over")
        << "\n";
  }
  char share[96];
  std::snprintf(share, sizeof share, "  recompute: %.1f%% of the model FLOPs of a step\n",
                100.0 * summary.recompute_share);
  out << share;
}

// The step-time model's prediction (step_time.h).
void print_prediction(const StepPrediction& p, std::ostream& out) {
  char line[256];
  std::snprintf(
      line, sizeof line,
      "\npredicted step time %.1f ms, %.0f tokens/s, MFU %.1f%% (pipeline bubble %.1f ms, "
      "recompute %.1f ms on the slowest stage)\n",
      p.step_s * 1e3, p.tokens_per_s, p.mfu_percent, p.bubble_s * 1e3, p.recompute_s * 1e3);
  out << line << "  time from " << p.source << "\n";
  if (!p.links.empty()) out << "  links " << p.links << "\n";
}

struct PlanArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  double budget_gib = 0;  // > 0: plan automatically under it
  bool emit_yaml = false;
  std::string sweep;  // KEY=v1,v2,...
  std::string out_prefix = "plan_sweep";
  std::string timeline_prefix;             // --timeline: the replay's memory timeline of every rank
  std::string profile;                     // --profile: train.time_profile
  std::string links;                       // --link-gbps
  bool search = false;                     // --search: the layout search (layout_search.h)
  int64_t ranks = 0;                       // --ranks
  int64_t top = 10;                        // --top
  std::vector<std::string> more_profiles;  // --profile given again (--search only)
};

// A flag's value as an integer >= 1; InputError naming the flag.
int64_t positive_integer(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || errno != 0 || value < 1)
    throw runtime::InputError("plan: " + flag + " needs a positive integer, got '" + text + "'");
  return value;
}

// Every --profile in order (the first is train.time_profile).
std::vector<std::string> profile_list(const PlanArgs& parsed) {
  std::vector<std::string> all;
  if (!parsed.profile.empty()) all.push_back(parsed.profile);
  all.insert(all.end(), parsed.more_profiles.begin(), parsed.more_profiles.end());
  return all;
}

// --search needs --ranks and --budget-gib, and --ranks and --top need --search.
void check_search_args(const PlanArgs& parsed, const std::vector<std::string>& args) {
  const auto given = [&](const char* flag) {
    return std::find(args.begin(), args.end(), flag) != args.end();
  };
  if (!parsed.search) {
    for (const char* flag : {"--ranks", "--top"})
      if (given(flag))
        throw runtime::InputError(std::string("plan: ") + flag + " goes with --search");
    if (!parsed.more_profiles.empty())
      throw runtime::InputError("plan: --profile more than once goes with --search");
    return;
  }
  if (parsed.ranks == 0)
    throw runtime::InputError("plan: --search needs --ranks N (the job's ranks)");
  if (parsed.budget_gib <= 0)
    throw runtime::InputError("plan: --search needs --budget-gib X (the memory per rank)");
  if (!parsed.sweep.empty() || !parsed.timeline_prefix.empty())
    throw runtime::InputError("plan: --search goes with neither --sweep nor --timeline");
}

PlanArgs parse_plan_args(const std::vector<std::string>& args) {
  PlanArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw runtime::InputError("plan: " + a + " needs a value");
      return args[++i];
    };
    if (a == "--config") {
      parsed.config_path = value();
    } else if (a == "--set") {
      parsed.overrides.push_back(value());
    } else if (a == "--budget-gib") {
      const std::string& text = value();
      char* end = nullptr;
      parsed.budget_gib = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(parsed.budget_gib > 0)) {
        throw runtime::InputError("plan: --budget-gib needs a number of GiB > 0, got '" + text +
                                  "'");
      }
    } else if (a == "--emit-yaml") {
      parsed.emit_yaml = true;
    } else if (a == "--sweep") {
      parsed.sweep = value();
    } else if (a == "--out") {
      parsed.out_prefix = value();
    } else if (a == "--timeline") {
      parsed.timeline_prefix = value();
    } else if (a == "--profile") {
      if (parsed.profile.empty()) {
        parsed.profile = value();
      } else {
        parsed.more_profiles.push_back(value());  // --search: other rank shapes' profiles
      }
    } else if (a == "--link-gbps") {
      parsed.links = value();
    } else if (a == "--search") {
      parsed.search = true;
    } else if (a == "--ranks") {
      parsed.ranks = positive_integer(a, value());
    } else if (a == "--top") {
      parsed.top = positive_integer(a, value());
    } else {
      throw runtime::InputError("plan: unknown argument '" + a + "' (see trainer plan --help)");
    }
  }
  if (parsed.config_path.empty()) throw runtime::InputError("plan: --config FILE is required");
  if (!parsed.timeline_prefix.empty() && (parsed.emit_yaml || !parsed.sweep.empty()))
    throw runtime::InputError("plan: --timeline goes with neither --sweep nor --emit-yaml");
  check_search_args(parsed, args);
  return parsed;
}

// The meta replay's timeline of every world rank of `config`, written under `prefix` (--timeline);
// returns how many ranks were written.
int64_t write_predicted_timelines(const Config& config, const std::string& prefix) {
  const int64_t world = config.parallel.world_size();
  for (int64_t rank = 0; rank < world; ++rank) {
    runtime::memory_timeline::Timeline predicted;
    predict_rank_memory(config, rank, &predicted);
    write_memory_timeline(
        prefix,
        {.rank = rank,
         .label = rank_label(rank, parallel::rank_coordinates(rank, config.parallel)),
         .source = "predicted",
         .step = std::nullopt},
        predicted);
  }
  return world;
}

}  // namespace

void print_plan(const Config& config, const std::string& source, std::ostream& out) {
  std::vector<StageSetup> stages;
  for (int64_t stage = 0; stage < config.parallel.pipeline; ++stage)
    stages.push_back(make_stage_setup(config, stage, 0));
  const model::LayerDims& dims = stages[0].dims;
  char line[256];
  std::snprintf(line, sizeof line,
                "recompute plan of %s: micro batch %lld, seq %lld, hidden %lld, heads %lld, "
                "%s attention, %s activations, %lld microbatches per step\n",
                source.c_str(), static_cast<long long>(dims.micro_batch),
                static_cast<long long>(dims.context().seq), static_cast<long long>(dims.hidden),
                static_cast<long long>(dims.heads),
                model::attention_backend_name(dims.features.attention),
                std::string(runtime::dtype_name(dims.activation_dtype)).c_str(),
                static_cast<long long>(stages[0].num_microbatches));
  out << line;
  for (const StageSetup& setup : stages) print_stage(config, setup, out);
  print_rank_memory(config, out);
}

int run_plan_command(const std::vector<std::string>& args, std::ostream& out,
                     parallel::Communicator* world) {
  const PlanArgs parsed = parse_plan_args(args);
  std::vector<std::string> overrides = parsed.overrides;
  if (parsed.budget_gib > 0) {
    overrides.push_back("train.memory_budget_gib=" + std::to_string(parsed.budget_gib));
  }
  if (!parsed.profile.empty()) overrides.push_back("train.time_profile=" + parsed.profile);
  if (!parsed.sweep.empty()) {
    run_plan_sweep({.config_path = parsed.config_path,
                    .overrides = overrides,
                    .sweep = parsed.sweep,
                    .out_prefix = parsed.out_prefix},
                   out);
    return 0;
  }
  Config config = load_config(parsed.config_path, overrides, ConfigUse::plan);
  const CostModel costs = CostModel::for_config(config);
  LinkBandwidths links = parsed.links.empty() ? default_links(config)
                                              : parse_links(parsed.links, default_links(config));
  if (world != nullptr && world->size() > 1) {  // under mpirun: measured links, rank 0 plans
    // The ranks measure their MPI links, which a CPU run's collectives take; a CUDA run's go over
    // NCCL between the GPUs, which this command does not set up, so they stay stated (or given).
    if (parsed.links.empty() && config.train.device == Device::cpu) {
      links = measure_links(*world, links);
    } else if (parsed.links.empty()) {
      links.source += " (not measured under mpirun: a CUDA run's collectives go over NCCL)";
    }
    if (world->rank() != 0) return 0;
  }
  if (parsed.search) {
    return run_layout_search(config,
                             {.ranks = parsed.ranks,
                              .top = parsed.top,
                              .emit_yaml = parsed.emit_yaml,
                              .profiles = profile_list(parsed),
                              .costs = &costs,
                              .links = links},
                             out);
  }
  double search_seconds = -1;
  std::vector<ChoiceProof> stage_proof;
  if (parsed.budget_gib > 0 || config.recompute.automatic) {
    const bool by_time = config.train.plan_objective == PlanObjective::time;
    const AutoPlan plan = plan_under_budget(config, budget_bytes(config.train.memory_budget_gib),
                                            {by_time ? &costs : nullptr, links});
    config.recompute = plan.recompute;
    search_seconds = plan.search_seconds;
    stage_proof = plan.stage_proof;
  }
  if (parsed.emit_yaml) {  // without the fields the plan leaves unset
    std::istringstream yaml(recompute_yaml(config.recompute));
    for (std::string line; std::getline(yaml, line);) {
      const bool unset = line.ends_with(": ~") || line.ends_with("[]") ||
                         line.ends_with("stages:") || line.ends_with("auto: false");
      if (!unset) out << line << "\n";
    }
    return 0;
  }
  print_plan(config, parsed.config_path, out);
  if (!parsed.timeline_prefix.empty()) {
    const int64_t ranks = write_predicted_timelines(config, parsed.timeline_prefix);
    out << "memory timeline of one step: " << ranks << " rank" << (ranks > 1 ? "s" : "")
        << " written to " << timeline_json_path(parsed.timeline_prefix, 0) << " ... and "
        << timeline_trace_path(parsed.timeline_prefix, 0) << " ...\n";
  }
  if (search_seconds >= 0) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "  planned automatically (least recompute %s under the budget) in %.3f s\n",
                  config.train.plan_objective == PlanObjective::time ? "time" : "FLOPs",
                  search_seconds);
    out << line;
    for (const std::string& proof : stage_proof_lines(stage_proof)) out << "  " << proof << "\n";
  }
  print_prediction(predict_step_time(config, costs, links), out);
  return 0;
}

int commands::plan(int argc, char** argv, const std::vector<std::string>& args) {
  if (!launched_by_mpi()) return run_plan_command(args, std::cout);
  parallel::MpiRuntime mpi(&argc, &argv);
  runtime::set_error_rank(mpi.world_rank());
  try {
    parallel::ParallelConfig world;
    world.data = mpi.world_size();
    parallel::ProcessGroups groups = parallel::ProcessGroups::from_mpi(world);
    return run_plan_command(args, std::cout, groups.world.get());
  } catch (const std::exception& e) {
    report_and_abort(e, mpi.world_rank(), mpi.world_size());
    return 1;
  }
}

}  // namespace trainer
