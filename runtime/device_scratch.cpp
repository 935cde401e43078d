// The device scratch's growth, registered sizes and replay model (Note [Device scratch]).
#include "runtime/device_scratch.h"

#include "runtime/error.h"

namespace runtime {
namespace {
const ScratchSizes* g_sizes = nullptr;         // process-wide, as the device backend
thread_local MetaScratch* t_active = nullptr;  // this thread's replay, if it models one
}  // namespace

size_t grown_scratch_bytes(size_t current, size_t request) {
  if (request <= current) return current;
  return request > 2 * current ? request : 2 * current;
}

void register_device_scratch_sizes(const ScratchSizes* sizes) {
  g_sizes = sizes;
}

const ScratchSizes* device_scratch_sizes() {
  return g_sizes;
}

MetaScratch::MetaScratch(const ScratchSizes& sizes) : sizes_(sizes) {
  TRAINER_ASSERT(t_active == nullptr, "two MetaScratch on one thread");
  t_active = this;
}

MetaScratch::~MetaScratch() {
  t_active = nullptr;
}

MetaScratch* MetaScratch::active() {
  return t_active;
}

}  // namespace runtime
