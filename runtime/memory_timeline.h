// The memory timeline recorder (train.memory_timeline_step, `trainer plan --timeline`;
// docs/operations.md, "Memory timeline"): every allocation and free of one allocator, in order,
// with its category, bytes and the tensor's name, between phase markers (the compute scopes of
// runtime/trace.h). Rules: off, it costs one relaxed load and a branch per tensor and per Name;
// one recording at a time, of one allocator; names are static texts that outlive the recording.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/allocator.h"

namespace runtime {
namespace trace {
struct SliceInfo;
}

namespace memory_timeline {

// alloc/free: a tensor's storage; begin/end: a phase (a compute scope, "forward chunk0 mb1").
enum class Op : uint8_t { alloc, free, begin, end };
const char* op_name(Op op);

struct Event {
  Op op = Op::alloc;
  MemoryCategory category = MemoryCategory::workspace;  // alloc/free
  int64_t bytes = 0;                                    // alloc/free: requested bytes
  std::string name;  // alloc/free: the tensor's; begin/end: the phase's

  bool operator==(const Event&) const = default;
};

struct Timeline {
  // Bytes live per category when recording started (what the step starts from).
  std::array<int64_t, kNumMemoryCategories> start_bytes{};
  std::vector<Event> events;

  bool operator==(const Timeline&) const = default;
};

// The name of a storage that no Name scope named.
inline constexpr const char* kUnnamed = "unnamed";
// The name a free carries when its storage was allocated before recording started.
inline constexpr const char* kAllocatedBefore = "allocated before";

namespace detail {
inline std::atomic<bool> recording{false};
// The innermost Name of this thread (null: none).
inline thread_local const char* current_name = nullptr;
void allocated(const Allocator& allocator, const void* data, int64_t bytes,
               MemoryCategory category);
void freed(const Allocator& allocator, const void* data, int64_t bytes, MemoryCategory category);
// The scopes of runtime/trace.h (trace::Scope calls them while phases are followed): begin
// returns whether the scope opened a phase (on the recording thread), which end then closes.
// Compute-lane scopes are phase markers; the others only pass their fields on.
bool begin_phase(const trace::SliceInfo& info);
void end_phase();
}  // namespace detail

inline bool recording() {
  return detail::recording.load(std::memory_order_relaxed);
}

// Names the storages allocated on this thread while alive (the innermost Name wins).
class Name {
 public:
  explicit Name(const char* name) {
    if (!recording()) return;
    previous_ = detail::current_name;
    detail::current_name = name;
    set_ = true;
  }
  ~Name() {
    if (set_) detail::current_name = previous_;
  }
  Name(const Name&) = delete;
  Name& operator=(const Name&) = delete;

 private:
  const char* previous_ = nullptr;
  bool set_ = false;
};

// Starts recording `allocator`'s allocations and frees (from every thread) and the calling
// thread's phases; stop() ends it and returns what was recorded.
void start(const Allocator& allocator);
Timeline stop();

}  // namespace memory_timeline
}  // namespace runtime
