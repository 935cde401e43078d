// The meta allocator (counts, never maps) and the no-op operator table (Note [Meta replay]),
// which grows the replay's model of a device scratch (Note [Device scratch]).
#include "runtime/meta_device.h"

#include <cstring>

#include "runtime/device_scratch.h"

namespace runtime {

void* MetaAllocator::allocate(int64_t bytes, MemoryCategory category) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  category_stat(category).add(bytes);
  stats_.reserved.add(bytes);
  void* address = reinterpret_cast<void*>(next_address_);
  const uint64_t aligned =
      (static_cast<uint64_t>(bytes) + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  next_address_ += aligned;
  return address;
}

void MetaAllocator::deallocate(void* ptr, int64_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  category_stat(category).remove(bytes);
  stats_.reserved.remove(bytes);
}

namespace ops {
namespace {

// What operator `entry` asks of the device's scratch, called with its arguments, grows the
// replay's model of it (Note [Device scratch]).
template <class Entry, class... Args>
void grow_scratch(Entry ScratchSizes::*entry, const Args&... args) {
  MetaScratch* scratch = MetaScratch::active();
  if (scratch == nullptr || scratch->sizes().*entry == nullptr) return;
  scratch->request((scratch->sizes().*entry)(args...));
}

Backend make_meta_backend() {
  Backend b{};
#define TRAINER_META_ENTRY(result, name, ...)   \
  b.name = [](const auto&... args) -> result {  \
    grow_scratch(&ScratchSizes::name, args...); \
    return result();                            \
  };
  TRAINER_OPS(TRAINER_META_ENTRY, TRAINER_META_ENTRY)
#undef TRAINER_META_ENTRY
  b.download = [](const Tensor& host_dst, const Tensor&) {
    std::memset(host_dst.raw(), 0, static_cast<size_t>(host_dst.nbytes()));
  };
  return b;
}

}  // namespace

const Backend& meta_backend() {
  static const Backend backend = make_meta_backend();
  return backend;
}

}  // namespace ops
}  // namespace runtime
