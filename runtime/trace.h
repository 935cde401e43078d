// The schedule trace recorder (train.trace; docs/operations.md, "Schedule trace"): RAII
// scopes that record a slice each (name, lane, layer / microbatch / chunk, group, bytes, start
// and duration) while recording is on, and a Chrome trace event writer.
// Rules: off, a scope costs one relaxed load and a branch; only the thread that started
// recording records (other threads' scopes are no-ops); a slice leaves layer, microbatch and
// chunk unset (-1) to take them from the innermost open slice that has them. The memory
// timeline (runtime/memory_timeline.h) follows the same scopes as its phases.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace runtime::trace {

// A row of a rank's trace (the Chrome trace's tid).
enum class Lane : int { compute = 1, comm = 2 };
const char* lane_name(Lane lane);

// What a slice is. Texts are static (string literals, group names that outlive the trace).
struct SliceInfo {
  const char* name = "";
  Lane lane = Lane::compute;
  const char* detail = nullptr;  // a second word of the name ("wait send": detail "send")
  const char* group = nullptr;   // comm: the process group ("tp", "pp", "dp", "cp", ...)
  int64_t layer = -1;            // the global layer id
  int64_t microbatch = -1;
  int64_t chunk = -1;  // the model chunk (virtual pipeline stage) of this rank
  int64_t bytes = -1;  // comm: the payload
  int64_t step = -1;
};

struct Slice {
  SliceInfo info;
  int64_t start_ns = 0;     // since the time origin (steady clock)
  int64_t duration_ns = 0;  // -1 while open
};

namespace detail {
// Who follows the scopes: the trace (kSlices) and the memory timeline's phases (kPhases).
inline constexpr unsigned kSlices = 1, kPhases = 2;
inline std::atomic<unsigned> followers{0};
void follow_phases(bool on);
// The slice's index in the record, or -1 when this thread does not record.
int64_t open(const SliceInfo& info);
void close(int64_t index);
}  // namespace detail

inline bool recording() {
  return (detail::followers.load(std::memory_order_relaxed) & detail::kSlices) != 0;
}

// Records one slice from construction to destruction.
class Scope {
 public:
  explicit Scope(const SliceInfo& info) {
    if (detail::followers.load(std::memory_order_relaxed) != 0) open(info);
  }
  ~Scope() {
    if (index_ >= 0 || phase_) close();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void open(const SliceInfo& info);
  void close();

  int64_t index_ = -1;  // the trace's slice, or -1
  bool phase_ = false;  // a memory timeline phase is open
};

// Starts recording on the calling thread (slices recorded so far are kept), and stops it.
void start();
void stop();
// The slices recorded since the last take, in start order; clears the record.
std::vector<Slice> take();
// The system clock (ns since the Unix epoch) at the first start(): slices' start_ns count from
// it, so traces of ranks align on it.
int64_t time_origin_ns();

// "forward L3 mb1", "forward chunk0 mb1", "all_reduce tp", "wait send pp".
std::string slice_name(const SliceInfo& info);

// Writes `slices` as a Chrome trace event file (a JSON object with traceEvents; Perfetto and
// chrome://tracing read it): "X" events with ts/dur in microseconds since the time origin
// (otherData.time_origin_ns), pid `rank`, tid the lane, args with the slice's fields, and
// process_name / thread_name metadata events naming the rank `process_label` and the lanes.
// Through a temporary file and a rename; InputError when the file cannot be written.
void write_chrome_trace(const std::string& path, int64_t rank, const std::string& process_label,
                        const std::vector<Slice>& slices);

}  // namespace runtime::trace
