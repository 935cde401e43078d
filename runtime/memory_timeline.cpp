// The memory timeline's record: one process-wide recording of one allocator's events, appended
// under a mutex, with the recording thread's open phases for inheritance (as the trace's).
#include "runtime/memory_timeline.h"

#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/error.h"
#include "runtime/trace.h"

namespace runtime::memory_timeline {
namespace {

struct Recorder {
  std::mutex mutex;
  const Allocator* allocator = nullptr;
  std::thread::id thread;  // the thread whose phases are recorded
  Timeline timeline;
  std::unordered_map<const void*, const char*> names;  // live storages allocated while recording
  std::vector<trace::SliceInfo> phases;                // open phases, innermost last
};

Recorder& recorder() {
  static Recorder record;
  return record;
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::alloc:
      return "alloc";
    case Op::free:
      return "free";
    case Op::begin:
      return "begin";
    case Op::end:
      return "end";
  }
  return "?";
}

void detail::allocated(const Allocator& allocator, const void* data, int64_t bytes,
                       MemoryCategory category) {
  Recorder& record = recorder();
  if (bytes == 0) return;  // no storage
  std::lock_guard<std::mutex> lock(record.mutex);
  if (&allocator != record.allocator) return;
  const char* name = current_name != nullptr ? current_name : kUnnamed;
  record.names[data] = name;
  record.timeline.events.push_back({Op::alloc, category, bytes, name});
}

void detail::freed(const Allocator& allocator, const void* data, int64_t bytes,
                   MemoryCategory category) {
  Recorder& record = recorder();
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(record.mutex);
  if (&allocator != record.allocator) return;
  const auto it = record.names.find(data);
  const char* name = it == record.names.end() ? kAllocatedBefore : it->second;
  if (it != record.names.end()) record.names.erase(it);
  record.timeline.events.push_back({Op::free, category, bytes, name});
}

bool detail::begin_phase(const trace::SliceInfo& info) {
  Recorder& record = recorder();
  if (std::this_thread::get_id() != record.thread) return false;
  trace::SliceInfo phase = info;
  if (!record.phases.empty()) {  // inherit as the trace does (runtime/trace.h)
    const trace::SliceInfo& parent = record.phases.back();
    for (auto [field, inherited] :
         {std::pair{&phase.layer, parent.layer}, std::pair{&phase.microbatch, parent.microbatch},
          std::pair{&phase.chunk, parent.chunk}}) {
      if (*field < 0) *field = inherited;
    }
  }
  record.phases.push_back(phase);
  if (phase.lane == trace::Lane::compute && memory_timeline::recording()) {
    std::lock_guard<std::mutex> lock(record.mutex);
    record.timeline.events.push_back(
        {Op::begin, MemoryCategory::workspace, 0, trace::slice_name(phase)});
  }
  return true;
}

void detail::end_phase() {
  Recorder& record = recorder();
  if (record.phases.empty()) return;
  const trace::SliceInfo phase = record.phases.back();
  record.phases.pop_back();
  if (phase.lane == trace::Lane::compute && memory_timeline::recording()) {
    std::lock_guard<std::mutex> lock(record.mutex);
    record.timeline.events.push_back(
        {Op::end, MemoryCategory::workspace, 0, trace::slice_name(phase)});
  }
}

void start(const Allocator& allocator) {
  Recorder& record = recorder();
  TRAINER_ASSERT(!recording(), "a memory timeline is already recording");
  {
    std::lock_guard<std::mutex> lock(record.mutex);
    record.allocator = &allocator;
    record.thread = std::this_thread::get_id();
    record.timeline = {};
    record.names.clear();
    const AllocatorStats stats = allocator.stats();
    for (const MemoryCategory c : kAllMemoryCategories)
      record.timeline.start_bytes[static_cast<size_t>(c)] = stats[c].current;
  }
  record.phases.clear();
  detail::recording.store(true, std::memory_order_relaxed);
  trace::detail::follow_phases(true);
}

Timeline stop() {
  Recorder& record = recorder();
  trace::detail::follow_phases(false);
  detail::recording.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(record.mutex);
  record.allocator = nullptr;
  record.names.clear();
  Timeline timeline;
  timeline.events.swap(record.timeline.events);
  timeline.start_bytes = record.timeline.start_bytes;
  return timeline;
}

}  // namespace runtime::memory_timeline
