// How the world is split: tensor x context x data x pipeline parallel sizes and options.
#pragma once

#include <cstdint>
#include <vector>

namespace parallel {

enum class CommBackend { automatic, mpi, nccl };

struct ParallelConfig {
  int64_t tensor = 1;            // tensor-parallel size (heads, ffn and vocab are split)
  int64_t pipeline = 1;          // pipeline stages
  int64_t data = 1;              // data-parallel replicas
  int64_t context = 1;           // context-parallel ranks: each holds 2 of 2 x context chunks
  int64_t virtual_pipeline = 1;  // model chunks per stage (interleaved 1F1B when > 1)
  bool sequence_parallel = false;
  std::vector<int64_t> layers_per_stage;  // empty: even split
  CommBackend backend = CommBackend::automatic;

  int64_t world_size() const { return tensor * context * data * pipeline; }
  // Ranks that hold the same parameters and average their gradients: data x context.
  int64_t replicas() const { return data * context; }
  bool operator==(const ParallelConfig&) const = default;
};

// Global layers [first, first + count) of one model chunk.
struct LayerRange {
  int64_t first = 0;
  int64_t count = 0;
};

// The model chunks of every pipeline stage: result[stage][v] is chunk v of that
// stage. Interleaved (virtual_pipeline > 1): the layers form pipeline x virtual
// equal chunks and stage r holds chunks r, r + pipeline, ... (Megatron's order).
// With layers_per_stage given, stage r holds that many consecutive layers.
// Assumes a validated config.
std::vector<std::vector<LayerRange>> stage_layer_chunks(const ParallelConfig& config,
                                                        int64_t num_layers);

}  // namespace parallel
