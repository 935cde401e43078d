// The world split into tensor x context x data x pipeline groups, tp fastest, then cp, then
// dp, then pp (Megatron-Core's order). With tp 2, dp 2, pp 2 on 8 ranks (cp 1):
//   rank:  0  1  2  3  4  5  6  7
//   tp:    0  1  0  1  0  1  0  1     tp groups {0,1} {2,3} {4,5} {6,7}
//   dp:    0  0  1  1  0  0  1  1     dp groups {0,2} {1,3} {4,6} {5,7}
//   pp:    0  0  0  0  1  1  1  1     pp groups {0,4} {1,5} {2,6} {3,7}
// One ProcessGroups object is passed explicitly to whoever needs a group.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "parallel/core/communicator.h"
#include "parallel/core/parallel_config.h"

namespace parallel {

struct RankCoordinates {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

RankCoordinates rank_coordinates(int64_t rank, const ParallelConfig& config);

struct ProcessGroups {
  ParallelConfig config;
  int64_t world_rank = 0;
  RankCoordinates coordinates;
  std::unique_ptr<Communicator> world, tp, pp;
  // The context-parallel ring: the ranks of one (tp, dp, pp) position, which hold the chunks
  // of one sequence.
  std::unique_ptr<Communicator> cp;
  // Every rank that holds the same parameters: the data x context ranks of one (tp, pp)
  // position, ranked cp fastest (Megatron's data-parallel group with context parallelism).
  // Gradients are averaged over it, the distributed optimizer is sharded over it and the loss
  // sums over it. Without context parallelism it is the data-parallel group.
  std::unique_ptr<Communicator> dp;
  // First and last pipeline stage of one (tp, cp, dp) position, for the tied word
  // embeddings; null on other stages and without a pipeline.
  std::unique_ptr<Communicator> embedding;
  // tp x pp ranks of one (cp, dp) position: the ranks that together hold one model.
  std::unique_ptr<Communicator> model_parallel;

  int64_t world_size() const { return config.world_size(); }
  // Bytes this rank has handed to any of its groups (communicator payloads).
  int64_t payload_bytes() const;
  bool is_logging_rank() const { return world_rank == 0; }

  // One process, every group of size 1.
  static ProcessGroups single();
  // Splits MPI_COMM_WORLD (MPI must be initialized, world size must match).
  static ProcessGroups from_mpi(const ParallelConfig& config);
};

// Gives the tp, cp, dp, pp and embedding groups of more than one rank a second communicator for
// device tensors, made by `make_device` from the group's host one, next to it
// (SplitCommunicator): device tensors then go to the new one, host buffers and tensors stay
// on the old. `point_to_point` is true for the pipeline group, whose device tensors also
// travel between neighbouring stages, and for the context ring. Collective: every rank makes its
// groups' communicators in the same order.
void add_device_communicators(
    ProcessGroups& groups,
    const std::function<std::unique_ptr<Communicator>(Communicator& host, bool point_to_point)>&
        make_device);

// add_device_communicators with NCCL; each rank must have selected its own CUDA device first
// (NCCL allows one rank per device). `compute_stream`: the cudaStream_t the CUDA backend
// computes on (Note [NCCL buffers are ready]). CUDA builds only.
void use_nccl_for_device_tensors(ProcessGroups& groups, void* compute_stream);

// Owns MPI_Init / MPI_Finalize for the process.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  int world_rank() const { return rank_; }
  int world_size() const { return size_; }
  // This rank's index among the ranks of its node, and their number (MPI_COMM_TYPE_SHARED),
  // whatever the launcher.
  int local_rank() const { return local_rank_; }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

// Ends every rank of the job (MPI_Abort when MPI is up, exit otherwise).
[[noreturn]] void abort_job(int exit_code);

}  // namespace parallel
