// The trace of communication (runtime/trace.h, Note [Communication trace]): a slice per
// communicator call and per wait on its request, on the trace's comm lane. Off, a CommTrace
// costs one branch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "runtime/trace.h"

namespace parallel {

class Request;

// Note [Communication trace]
// Every public method of Communicator opens a CommTrace: while the trace records, one slice
// on the comm lane named by the operation and the group of the communicator the caller used
// ("all_reduce tp", "send pp"), with its payload bytes, and a request it returns is wrapped
// so that its wait() is a slice too ("wait send pp"). A blocking recv is its own wait. Only
// the outermost call is recorded: a tensor method that stages through a buffer method, or a
// SplitCommunicator that hands the call to its host or device communicator, makes one slice.
// Layer, microbatch and chunk come from the compute slice the call happens in.
class CommTrace {
 public:
  CommTrace(const char* operation, const char* group, int64_t bytes) {
    if (!runtime::trace::recording()) return;
    counted_ = true;
    if (depth_++ > 0) return;
    info_ = {.name = operation, .lane = runtime::trace::Lane::comm, .group = group, .bytes = bytes};
    index_ = runtime::trace::detail::open(*info_);
  }
  ~CommTrace() {
    if (index_ >= 0) runtime::trace::detail::close(index_);
    if (counted_) --depth_;
  }
  CommTrace(const CommTrace&) = delete;
  CommTrace& operator=(const CommTrace&) = delete;

  // `request` itself, or (a recorded call) wrapped so that its wait() is traced.
  std::unique_ptr<Request> traced(std::unique_ptr<Request> request) const;

 private:
  static inline thread_local int depth_ = 0;  // open CommTraces of this thread
  bool counted_ = false;
  std::optional<runtime::trace::SliceInfo> info_;  // set for the outermost call
  int64_t index_ = -1;                             // the recorded slice, or -1
};

}  // namespace parallel
