// The trace recorder (runtime/trace.h) and the communication trace (parallel/core/comm_trace.h):
// nothing is recorded while off, slices nest and inherit layer / microbatch / chunk, a
// communicator call is one slice however many levels it passes through, a wait is a slice,
// and the Chrome trace file holds what was recorded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "parallel/core/communicator.h"
#include "runtime/trace.h"

namespace runtime::trace {
namespace {

// Runs `body` with recording on and returns what it recorded.
template <class Body>
std::vector<Slice> recorded(Body&& body) {
  take();  // nothing left from an earlier test
  start();
  body();
  stop();
  return take();
}

TEST(Trace, OffRecordsNothing) {
  take();
  { const Scope scope({.name = "forward", .layer = 1}); }
  EXPECT_FALSE(recording());
  EXPECT_TRUE(take().empty());
}

TEST(Trace, SlicesNestAndInheritTheirParentsMicrobatchAndChunk) {
  const std::vector<Slice> slices = recorded([] {
    const Scope op({.name = "backward", .microbatch = 3, .chunk = 1});
    {
      const Scope layer({.name = "backward", .layer = 5});
      const Scope rebuild({.name = "recompute"});
    }
  });
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slice_name(slices[0].info), "backward chunk1 mb3");
  EXPECT_EQ(slice_name(slices[1].info), "backward L5 mb3");
  EXPECT_EQ(slice_name(slices[2].info), "recompute L5 mb3");
  EXPECT_EQ(slices[2].info.chunk, 1);
  for (const Slice& s : slices) EXPECT_GE(s.duration_ns, 0);
  // Each child lies within its parent.
  for (size_t child = 1; child < slices.size(); ++child) {
    const Slice& parent = slices[child - 1];
    EXPECT_GE(slices[child].start_ns, parent.start_ns);
    EXPECT_LE(slices[child].start_ns + slices[child].duration_ns,
              parent.start_ns + parent.duration_ns);
  }
}

TEST(Trace, ACommunicatorCallIsOneSliceWithItsGroupAndBytesAndItsWaitAnother) {
  parallel::SelfCommunicator tp;
  tp.set_group_name("tp");
  CpuAllocator allocator;
  const Tensor data = Tensor::empty(allocator, {16}, DType::f32, MemoryCategory::comm);
  const std::vector<Slice> slices = recorded([&] {
    const Scope layer({.name = "forward", .layer = 2, .microbatch = 0});
    tp.all_reduce_sum(data);  // a tensor method over a buffer method: one slice
    tp.reduce_scatter_async(data, data)->wait();
  });
  std::vector<std::string> names;
  for (const Slice& s : slices) names.push_back(slice_name(s.info));
  EXPECT_EQ(names,
            (std::vector<std::string>{"forward L2 mb0", "all_reduce tp", "reduce_scatter_async tp",
                                      "wait reduce_scatter_async tp"}));
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_EQ(slices[1].info.lane, Lane::comm);
  EXPECT_EQ(slices[1].info.bytes, 64);
  EXPECT_EQ(slices[1].info.layer, 2);  // from the compute slice it ran in
  EXPECT_EQ(slices[3].info.bytes, 64);
}

TEST(Trace, TheChromeTraceFileHoldsEverySliceAndTheLaneNames) {
  const std::vector<Slice> slices = recorded([] {
    const Scope step({.name = "step", .step = 7});
    const Scope optimizer({.name = "optimizer"});
  });
  const std::string path =
      (std::filesystem::temp_directory_path() / ("trace_test_" + std::to_string(::getpid())))
          .string();
  write_chrome_trace(path, 3, "rank 3", slices);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  EXPECT_NE(text.find("\"traceEvents\": ["), std::string::npos);
  EXPECT_NE(text.find("{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": 3, "
                      "\"tid\": 0, \"args\": {\"name\": \"rank 3\"}}"),
            std::string::npos);
  EXPECT_NE(text.find("\"args\": {\"name\": \"comm\"}"), std::string::npos);
  EXPECT_NE(text.find("{\"name\": \"optimizer\", \"cat\": \"compute\", \"ph\": \"X\", \"ts\": "),
            std::string::npos);
  EXPECT_NE(text.find("\"args\": {\"step\": 7}}"), std::string::npos);  // inherited
}

}  // namespace
}  // namespace runtime::trace
