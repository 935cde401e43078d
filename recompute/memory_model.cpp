// The activation memory model: a replay of the executor's allocations in bytes.
#include "recompute/memory_model.h"

#include <algorithm>

#include "model/embedding_head.h"

namespace recompute {

ActivationMemory predict_activation_memory(const model::GptConfig& config,
                                           const model::LayerDims& dims, const RecomputePlan& plan,
                                           int64_t in_flight, bool has_embedding, bool has_head,
                                           bool has_documents) {
  const int64_t L = plan.num_layers();
  // A layer's input and a checkpoint group's input: the rank's rows (the sequence shard under
  // sequence parallelism).
  const int64_t hidden_bytes = dims.seq_shard() * dims.micro_batch * dims.hidden *
                               runtime::dtype_size(dims.activation_dtype);
  const model::LayerRecompute keep_all{};
  const int64_t full_stash = model::stash_kept_bytes(model::layer_stash_spec(dims, keep_all));

  ActivationMemory m;
  m.embedding = has_embedding ? model::stash_kept_bytes(model::embedding_stash_spec(dims)) : 0;
  m.documents = has_documents ? dims.context().local_seq() * dims.micro_batch *
                                    runtime::dtype_size(runtime::DType::i32)
                              : 0;
  m.head =
      has_head ? model::stash_kept_bytes(model::head_stash_spec(config, dims, /*keep=*/true)) : 0;
  m.layers.resize(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    LayerMemory& layer = m.layers[static_cast<size_t>(i)];
    const auto spec = model::layer_stash_spec(dims, plan.layers[static_cast<size_t>(i)]);
    if (plan.is_full(i)) {
      layer.checkpoint = plan.group_start(i) == i ? hidden_bytes : 0;
    } else {
      layer.kept = model::stash_kept_bytes(spec);
      layer.rebuilt = model::stash_dropped_bytes(spec);
    }
  }

  // below[i]: bytes kept by layers [0, i) plus the embedding and the document starts.
  std::vector<int64_t> below(static_cast<size_t>(L) + 1, m.embedding + m.documents);
  for (int64_t i = 0; i < L; ++i) {
    const size_t li = static_cast<size_t>(i);
    below[li + 1] = below[li] + m.layers[li].kept + m.layers[li].checkpoint;
  }
  m.forward_end = below[static_cast<size_t>(L)] + m.head;

  // Backward: the head is gone; layer i (or group [first, i]) is being rebuilt.
  for (int64_t i = L - 1; i >= 0;) {
    if (plan.is_full(i)) {
      const int64_t first = plan.group_start(i);
      // The group's checkpoint becomes the first layer's stash input: count it once.
      const int64_t rebuilt = (i - first + 1) * full_stash - hidden_bytes;
      m.backward_peak = std::max(m.backward_peak, below[static_cast<size_t>(first) + 1] + rebuilt);
      i = first - 1;
    } else {
      m.backward_peak = std::max(m.backward_peak, below[static_cast<size_t>(i) + 1] +
                                                      m.layers[static_cast<size_t>(i)].rebuilt);
      --i;
    }
  }
  m.backward_peak = std::max(m.backward_peak, m.embedding + m.documents);
  m.peak = (in_flight - 1) * m.forward_end + std::max(m.forward_end, m.backward_peak);
  return m;
}

}  // namespace recompute
