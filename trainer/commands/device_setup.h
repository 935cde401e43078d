// What every command that runs a model sets up first: whether a launcher started the process,
// the process's device (a GPU's context and caching allocator, or the host's allocator), and how
// an error ends the job. The one file of the trainer that includes the CUDA backend's headers
// (docs/architecture.md, "Libraries and layering").
#pragma once

#include <exception>
#include <memory>

#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"

namespace trainer::commands {

// Whether a launcher (mpirun, srun) started this process: then MPI is set up; a plain
// `trainer train` runs as one rank without the MPI runtime.
bool launched_by_mpi();

// Prints the error with the rank and, when other ranks exist, ends the whole job at once.
void report_and_abort(const std::exception& error, int world_rank, int world_size);

// The process's device for a run: on cuda, a CUDA context and its caching allocator; the host
// allocator otherwise. Declared before the groups, so it outlives their communicators (the
// context goes first, then the allocator).
class RunDevice {
 public:
  RunDevice();
  ~RunDevice();
  RunDevice(const RunDevice&) = delete;
  RunDevice& operator=(const RunDevice&) = delete;

  runtime::Allocator& allocator() { return *allocator_; }

  // Fills this device for train.device: this rank's GPU on cuda (check_supported has rejected
  // cuda in a build without it), with device tensors communicated over NCCL when every rank has
  // a GPU of its own (resolve_comm_backend decides, alike on all ranks), else staged through host
  // memory by MPI; the host allocator on cpu.
  void set_up(const Config& config, parallel::ProcessGroups& groups, int local_rank);
  // The GPU of `local_rank` alone, with its context, the CUDA backend registered on it and its
  // caching allocator (`trainer generate --device cuda`); InputError naming the flag in a build
  // without CUDA.
  void set_up_gpu(int local_rank);

 private:
  struct Gpu;
  std::unique_ptr<runtime::Allocator> allocator_;
  std::unique_ptr<Gpu> gpu_;  // declared after the allocator: goes first
};

}  // namespace trainer::commands
