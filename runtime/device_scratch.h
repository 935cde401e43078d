// The scratch buffer a device backend keeps for its operators' temporaries, as the memory
// model sees it (Note [Device scratch]): how it grows, the bytes each operator asks of it, and
// its model in the meta replay.
#pragma once

#include <cstddef>

#include "runtime/ops.h"

namespace runtime {

// Note [Device scratch]
// A device backend may keep one scratch buffer for its operators' temporaries (the CUDA
// backend's CudaContext::scratch): workspace memory, taken when an operator first needs more
// than it holds and kept, grown to grown_scratch_bytes. ScratchSizes gives the bytes each
// operator asks of it (null: none). The meta replay of a device run grows a model of the
// buffer, in the same order, through the registered sizes (MetaScratch), and the workspace the
// memory model predicts holds its final size: from a run's second step on, the buffer holds
// that much throughout every step.
struct ScratchSizes {
#define TRAINER_SCRATCH_OP(result, name, Args, on) size_t (*name)(const ops::Args& args);
#define TRAINER_SCRATCH_MEMORY_OP(result, name, params) size_t(*name) params;
  TRAINER_OPS(TRAINER_SCRATCH_OP, TRAINER_SCRATCH_MEMORY_OP)
#undef TRAINER_SCRATCH_OP
#undef TRAINER_SCRATCH_MEMORY_OP
};

// The scratch size after a request of `request` bytes while it holds `current`: unchanged when
// enough, else the larger of the request and twice what it held.
size_t grown_scratch_bytes(size_t current, size_t request);

// Installs the device backend's sizes (with its backend; null: no scratch is modelled).
void register_device_scratch_sizes(const ScratchSizes* sizes);
const ScratchSizes* device_scratch_sizes();

// The model of a device's scratch in a replay: while one exists, the meta operators of this
// thread grow it by the sizes it was given. It allocates nothing.
class MetaScratch {
 public:
  explicit MetaScratch(const ScratchSizes& sizes);
  ~MetaScratch();
  MetaScratch(const MetaScratch&) = delete;
  MetaScratch& operator=(const MetaScratch&) = delete;
  void request(size_t bytes) { bytes_ = grown_scratch_bytes(bytes_, bytes); }
  size_t bytes() const { return bytes_; }
  const ScratchSizes& sizes() const { return sizes_; }
  // This thread's, or null.
  static MetaScratch* active();

 private:
  const ScratchSizes& sizes_;
  size_t bytes_ = 0;
};

}  // namespace runtime
