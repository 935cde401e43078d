// Note [OpenMP wait policy]
// libgomp reads OMP_WAIT_POLICY when it loads, before main, so a host process re-executes
// itself once with a policy chosen here unless one is set. Between parallel regions a spinning
// (active) worker wakes at once, a sleeping (passive) one through the kernel, which on a
// virtual machine costs a variable wake-up each region. Measured on 2 cores
// (scripts/bench_llama_cpu.sh's Llama shape, 20 steps per process, 3 processes each): active
// gave medians 131-146 ms with every step within 16% of its process's fastest, passive 133-172
// ms with single steps up to 226 ms. Spinning pays only while the process's team has the cores
// to itself: with more threads on the node than cores (several ranks per node, or
// OMP_NUM_THREADS over the cores) spinning workers take cores other ranks need, so those
// processes sleep. OpenBLAS runs single-threaded (Note [OpenMP and OpenBLAS threads] in
// kernels/cpu/gemm.cpp), so no second pool needs the cores between regions.
#include "runtime/openmp_wait.h"

#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>

namespace runtime {
namespace {

// A positive integer from the environment (the first entry of a list such as
// OMP_NUM_THREADS=4,2), else `fallback`.
int positive_env(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  const int value = std::atoi(text);
  return value > 0 ? value : fallback;
}

}  // namespace

const char* openmp_wait_policy() {
  cpu_set_t cpus;
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  // Ranks on this node, as Open MPI's mpirun, PMIx, MPICH's Hydra and Slurm's srun state them
  // before main (SLURM_STEP_TASKS_PER_NODE reads "4(x2)": its first count).
  int node_ranks = 0;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    node_ranks = positive_env(name, 0);
    if (node_ranks > 0) break;
  }
  if (node_ranks == 0) node_ranks = 1;
  const int threads = positive_env("OMP_NUM_THREADS", cores);
  return static_cast<int64_t>(node_ranks) * threads <= cores ? "active" : "passive";
}

void choose_openmp_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", openmp_wait_policy(), 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace runtime
