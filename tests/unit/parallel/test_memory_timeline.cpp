// The memory timeline recorder (runtime/memory_timeline.h): nothing while off; while on, every
// alloc and free of the one allocator it watches with its category, bytes and Name, frees of
// earlier storage marked, and the compute scopes of runtime/trace.h as phases, inheriting the
// microbatch as the trace does.
#include <gtest/gtest.h>

#include "runtime/memory_timeline.h"
#include "runtime/tensor.h"
#include "runtime/trace.h"

namespace runtime::memory_timeline {
namespace {

using runtime::trace::Scope;

Tensor floats(Allocator& allocator, int64_t count, MemoryCategory category) {
  return Tensor::empty(allocator, {count}, DType::f32, category);
}

TEST(MemoryTimeline, OffRecordsNothingAndNamesNothing) {
  CpuAllocator allocator;
  {
    const Name name("ignored");
    EXPECT_EQ(detail::current_name, nullptr);
    const Tensor t = floats(allocator, 4, MemoryCategory::activation);
  }
  start(allocator);
  const Timeline recorded = stop();
  EXPECT_TRUE(recorded.events.empty());
  EXPECT_FALSE(recording());
}

TEST(MemoryTimeline, RecordsTheWatchedAllocatorsEventsWithNamesAndPhases) {
  CpuAllocator watched, other;
  Tensor before = floats(watched, 8, MemoryCategory::param);  // 32 bytes live at the start
  start(watched);
  {
    const Scope op({.name = "forward", .microbatch = 1, .chunk = 0});
    Tensor stash;
    {
      const Scope layer({.name = "forward", .layer = 3});
      const Name name("ln1_out");
      stash = floats(watched, 4, MemoryCategory::activation);
      const Tensor elsewhere = floats(other, 4, MemoryCategory::activation);         // not recorded
      const Tensor empty = floats(watched, 0, MemoryCategory::workspace);            // no storage
      const Scope comm({.name = "all_reduce", .lane = runtime::trace::Lane::comm});  // no phase
      const Tensor temp = [&] {
        const Name inner("dq");  // the innermost Name wins
        return floats(watched, 2, MemoryCategory::workspace);
      }();
    }
    const Tensor unnamed = floats(watched, 1, MemoryCategory::comm);
    stash = Tensor();
    before = Tensor();
  }
  const Timeline t = stop();
  EXPECT_EQ(t.start_bytes[static_cast<size_t>(MemoryCategory::param)], 32);
  const std::vector<Event> expected = {
      {Op::begin, MemoryCategory::workspace, 0, "forward chunk0 mb1"},
      {Op::begin, MemoryCategory::workspace, 0, "forward L3 mb1"},
      {Op::alloc, MemoryCategory::activation, 16, "ln1_out"},
      {Op::alloc, MemoryCategory::workspace, 8, "dq"},
      {Op::free, MemoryCategory::workspace, 8, "dq"},
      {Op::end, MemoryCategory::workspace, 0, "forward L3 mb1"},
      {Op::alloc, MemoryCategory::comm, 4, kUnnamed},
      {Op::free, MemoryCategory::activation, 16, "ln1_out"},
      {Op::free, MemoryCategory::param, 32, kAllocatedBefore},
      {Op::free, MemoryCategory::comm, 4, kUnnamed},
      {Op::end, MemoryCategory::workspace, 0, "forward chunk0 mb1"},
  };
  ASSERT_EQ(t.events.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t.events[i], expected[i])
        << "event " << i << ": " << op_name(t.events[i].op) << " " << t.events[i].name;
  }
  // Stopped: a later allocation records nothing, and the trace's scopes are not followed.
  const Tensor after = floats(watched, 4, MemoryCategory::activation);
  start(watched);
  EXPECT_TRUE(stop().events.size() == 0);
  EXPECT_EQ(runtime::trace::detail::followers.load(), 0u);
}

}  // namespace
}  // namespace runtime::memory_timeline
