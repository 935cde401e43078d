// `trainer calibrate`'s arguments and its report: the profile written on rank 0, and what it
// measured printed.
#include "trainer/commands/calibrate_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <sstream>

#include "parallel/core/process_groups.h"
#include "runtime/error.h"
#include "trainer/commands/commands.h"
#include "trainer/commands/device_setup.h"
#include "trainer/planning/time_profile.h"
#include "trainer/run/train.h"

namespace trainer {

using Clock = std::chrono::steady_clock;

CalibrateArgs parse_calibrate_args(const std::vector<std::string>& args) {
  CalibrateArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw runtime::InputError("calibrate: " + a + " needs a value");
      return args[++i];
    };
    if (a == "--config") {
      parsed.config_path = value();
    } else if (a == "--set") {
      parsed.overrides.push_back(value());
    } else if (a == "--out") {
      parsed.out_path = value();
    } else if (a == "--repeats") {
      const std::string& text = value();
      char* end = nullptr;
      const long repeats = std::strtol(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || repeats < 1 || repeats > 1000)
        throw runtime::InputError("calibrate: --repeats needs a count from 1 to 1000, got '" +
                                  text + "'");
      parsed.options.repeats = static_cast<int>(repeats);
    } else if (a == "--min-seconds") {
      const std::string& text = value();
      char* end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(seconds >= 0 && seconds <= 600))
        throw runtime::InputError("calibrate: --min-seconds needs seconds from 0 to 600, got '" +
                                  text + "'");
      parsed.options.min_seconds = seconds;
    } else {
      throw runtime::InputError("calibrate: unknown argument '" + a +
                                "' (see trainer calibrate --help)");
    }
  }
  if (parsed.config_path.empty()) throw runtime::InputError("calibrate: --config FILE is required");
  return parsed;
}

int calibrate_command(const CalibrateArgs& args, const Config& config,
                      runtime::Allocator& allocator, std::ostream& out,
                      parallel::ProcessGroups* peers) {
  const auto start = Clock::now();
  CalibrationOptions options = args.options;
  options.document_starts = calibration_documents(config);
  const TimeProfile p = calibrate(config, allocator, options, peers);
  if (peers && peers->world_rank != 0) return 0;
  write_time_profile(p, args.out_path);
  auto ms = [](double seconds) { return seconds * 1e3; };
  char line[256];
  out << "calibrated " << p.device << ", " << p.dtype << ", at " << p.shapes << "\n";
  if (!options.document_starts.empty()) {
    std::snprintf(line, sizeof line,
                  "  attention timed with the documents of the first %zu microbatches (mean "
                  "length %.1f tokens; data.reset_attention_mask)\n",
                  options.document_starts.size(),
                  mean_document_length(options, config.train.micro_batch_size));
    out << line;
  }
  std::snprintf(line, sizeof line,
                "  GEMM %.1f GFLOP/s, copy %.1f GB/s; one layer, one microbatch: forward %.3f ms, "
                "backward %.3f ms (+%.3f and +%.3f ms with its stash cold)\n",
                p.gemm_gflops, p.copy_gbps, ms(p.layer_forward_s), ms(p.layer_backward_s),
                ms(p.stash_cold_forward_s), ms(p.stash_cold_backward_s));
  out << line;
  const parallel::ParallelConfig& pc = config.parallel;
  if (p.ranks > 1) {
    out << "  " << p.ranks << " ranks side by side ("
        << (p.collectives_measured
                ? TRAINER_STR("tensor x context groups of " << pc.tensor << " x " << pc.context
                                                            << ": collectives measured")
                : std::string("no tensor or context group"))
        << ")\n";
  } else if (pc.tensor * pc.context > 1) {
    out << "  collectives replayed: the comm model adds them (mpirun -np " << pc.tensor * pc.context
        << " trainer calibrate measures them)\n";
  }
  for (const RebuildTime& r : p.rebuild) {
    std::snprintf(line, sizeof line, "  rebuild %-40s %.3f ms\n", r.entry.c_str(), ms(r.seconds));
    out << line;
  }
  std::snprintf(line, sizeof line,
                "  embedding + head + loss: forward %.3f ms, backward %.3f ms; optimizer %.3f ns "
                "per parameter\n",
                ms(p.embedding_head_forward_s), ms(p.embedding_head_backward_s),
                p.optimizer_s_per_param * 1e9);
  out << line;
  std::snprintf(line, sizeof line, "wrote %s (median of %d rounds after %d warm-up, in %.1f s)\n",
                args.out_path.c_str(), static_cast<int>(p.repeats), args.options.warmup,
                std::chrono::duration<double>(Clock::now() - start).count());
  out << line;
  return 0;
}

namespace commands {

int calibrate(int argc, char** argv, const std::vector<std::string>& args) {
  const CalibrateArgs parsed = parse_calibrate_args(args);
  const Config config = load_config(parsed.config_path, parsed.overrides, ConfigUse::plan);
  check_supported(config);
  if (!launched_by_mpi()) {
    RunDevice device;
    parallel::ProcessGroups groups = parallel::ProcessGroups::single();
    device.set_up(config, groups, 0);
    return calibrate_command(parsed, config, device.allocator(), std::cout);
  }
  parallel::MpiRuntime mpi(&argc, &argv);
  runtime::set_error_rank(mpi.world_rank());
  try {
    RunDevice device;  // before the groups: it outlives their communicators
    parallel::ProcessGroups groups = calibration_groups(config, mpi.world_size());
    device.set_up(config, groups, mpi.local_rank());
    std::ostringstream discard;
    return calibrate_command(parsed, config, device.allocator(),
                             mpi.world_rank() == 0 ? std::cout : discard, &groups);
  } catch (const std::exception& e) {
    report_and_abort(e, mpi.world_rank(), mpi.world_size());
    return 1;
  }
}

}  // namespace commands
}  // namespace trainer
