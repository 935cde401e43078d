// Layer partitioning of the pipeline (see parallel_config.h).
#include "parallel/core/parallel_config.h"

#include <cstddef>

namespace parallel {

std::vector<std::vector<LayerRange>> stage_layer_chunks(const ParallelConfig& config,
                                                        int64_t num_layers) {
  std::vector<std::vector<LayerRange>> stages(static_cast<std::size_t>(config.pipeline));
  if (!config.layers_per_stage.empty()) {
    int64_t first = 0;
    for (std::size_t stage = 0; stage < stages.size(); ++stage) {
      stages[stage].push_back({first, config.layers_per_stage[stage]});
      first += config.layers_per_stage[stage];
    }
    return stages;
  }
  const int64_t chunks = config.pipeline * config.virtual_pipeline;
  const int64_t per_chunk = num_layers / chunks;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    stages[static_cast<std::size_t>(chunk % config.pipeline)].push_back(
        {chunk * per_chunk, per_chunk});
  }
  return stages;
}

}  // namespace parallel
