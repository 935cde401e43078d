// Context-parallel sequence search: under one per-rank activation budget, the longest sequence
// (a multiple of 64) whose exact per-rank activation peak (the whole-rank replay) fits, for
// cp = 1, 2, 4, 8 with flash attention and full recompute. scripts/bench_context.sh then trains
// each length under mpirun to confirm. Prints "cp seq predicted_bytes" lines.
// usage: bench_context BUDGET_MIB CONFIG [OVERRIDE...]
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/openmp_wait.h"
#include "trainer/config/config.h"
#include "trainer/planning/rank_memory.h"

namespace {

constexpr int64_t kStep = 64;  // lengths searched: multiples of 2 x 8 x tp
constexpr int64_t kLongest = int64_t{1} << 22;

// The run's config file and its overrides.
struct Run {
  std::string config_path;
  std::vector<std::string> overrides;
};

int64_t activation_peak(const Run& run, int64_t cp, int64_t seq) {
  std::vector<std::string> all = run.overrides;
  all.push_back("parallel.context=" + std::to_string(cp));
  all.push_back("model.seq_length=" + std::to_string(seq));
  const trainer::Config config =
      trainer::load_config(run.config_path, all, trainer::ConfigUse::plan);
  const trainer::RankMemory memory = trainer::predict_rank_memory(config, 0);
  return memory.peak[static_cast<size_t>(runtime::MemoryCategory::activation)];
}

// Binary search: the predicted peak grows with the length.
int64_t longest(const Run& run, int64_t cp, int64_t budget) {
  int64_t fits = 0, fails = kLongest / kStep + 1;  // in units of kStep
  while (fails - fits > 1) {
    const int64_t mid = (fits + fails) / 2;
    (activation_peak(run, cp, mid * kStep) <= budget ? fits : fails) = mid;
  }
  return fits * kStep;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_context BUDGET_MIB CONFIG [OVERRIDE...]\n");
    return 2;
  }
  const int64_t budget = std::stoll(argv[1]) << 20;
  const Run run{argv[2], std::vector<std::string>(argv + 3, argv + argc)};
  for (const int64_t cp : {1, 2, 4, 8}) {
    const int64_t seq = longest(run, cp, budget);
    std::printf("%lld %lld %lld\n", static_cast<long long>(cp), static_cast<long long>(seq),
                static_cast<long long>(seq > 0 ? activation_peak(run, cp, seq) : 0));
  }
  return 0;
}
