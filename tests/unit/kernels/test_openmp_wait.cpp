// The OpenMP wait policy a host process chooses: workers spin only while the node's ranks times
// OpenMP threads fit the cores (Note [OpenMP wait policy]).
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "runtime/openmp_wait.h"

namespace {

// Sets the launcher's variables for one check and restores them after.
class Environment {
 public:
  explicit Environment(std::vector<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      if (value != nullptr) {
        ::setenv(name, value, 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  ~Environment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

int cores() {
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
}

std::string policy(const char* local_size, const char* threads) {
  const Environment env({{"OMPI_COMM_WORLD_LOCAL_SIZE", local_size},
                         {"PMIX_LOCAL_SIZE", nullptr},
                         {"MPI_LOCALNRANKS", nullptr},
                         {"SLURM_STEP_TASKS_PER_NODE", nullptr},
                         {"SLURM_NTASKS_PER_NODE", nullptr},
                         {"OMP_NUM_THREADS", threads}});
  return runtime::openmp_wait_policy();
}

TEST(OpenmpWait, SpinsOnlyWhenTheTeamsFitTheCores) {
  const std::string all = std::to_string(cores());
  const std::string over = std::to_string(cores() + 1);
  EXPECT_EQ(policy(nullptr, nullptr), "active");  // one process, a thread per core
  EXPECT_EQ(policy("1", all.c_str()), "active");
  EXPECT_EQ(policy("1", over.c_str()), "passive");  // more threads than cores
  EXPECT_EQ(policy("2", all.c_str()), "passive");   // two ranks, each a thread per core
  EXPECT_EQ(policy(all.c_str(), "1"), "active");    // a rank per core, one thread each
  EXPECT_EQ(policy(over.c_str(), "1"), "passive");
  EXPECT_EQ(policy("2", nullptr), "passive");  // ranks default to every core's threads
  // OMP_NUM_THREADS may list nested levels: the first counts.
  EXPECT_EQ(policy("1", (over + ",1").c_str()), "passive");
}

// Each launcher's variable alone says two ranks share the node (Slurm's step count as "2(x3)").
TEST(OpenmpWait, EveryLauncherStatesTheRanks) {
  const std::string all = std::to_string(cores());
  const char* names[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE", "MPI_LOCALNRANKS",
                         "SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"};
  for (const char* stated : names) {
    std::vector<std::pair<const char*, const char*>> values{{"OMP_NUM_THREADS", all.c_str()}};
    for (const char* name : names) values.push_back({name, name == stated ? "2(x3)" : nullptr});
    const Environment env(values);
    EXPECT_STREQ(runtime::openmp_wait_policy(), "passive") << stated;
  }
  std::vector<std::pair<const char*, const char*>> none{{"OMP_NUM_THREADS", all.c_str()}};
  for (const char* name : names) none.push_back({name, nullptr});
  const Environment env(none);
  EXPECT_STREQ(runtime::openmp_wait_policy(), "active");
}

}  // namespace
