// How the world is split: tensor x data x pipeline parallel sizes and options.
#pragma once

#include <cstdint>
#include <vector>

namespace parallel {

enum class CommBackend { automatic, mpi, nccl };

struct ParallelConfig {
  int64_t tensor = 1;            // tensor-parallel size (heads, ffn and vocab are split)
  int64_t pipeline = 1;          // pipeline stages
  int64_t data = 1;              // data-parallel replicas
  int64_t virtual_pipeline = 1;  // model chunks per stage (interleaved 1F1B when > 1)
  bool sequence_parallel = false;
  std::vector<int64_t> layers_per_stage;  // empty: even split
  CommBackend backend = CommBackend::automatic;

  int64_t world_size() const { return tensor * pipeline * data; }
};

}  // namespace parallel
