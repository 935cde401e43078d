// The memory timeline predicted before launch against the one a run records: on every rank of a
// 4-rank pp2 x tp2 interleaved 1F1B run with selective and full recompute, the meta replay's
// allocs, frees and phases equal the allocator's during step 2, event for event (names,
// categories, bytes, order), on the CPU and on the emulated device (bf16).
#include <gtest/gtest.h>

#include <sstream>

#include "mpi_test_util.h"
#include "runtime/memory_timeline.h"
#include "trainer/planning/rank_memory.h"

namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;
namespace timeline = runtime::memory_timeline;

std::string describe(const timeline::Event& e) {
  std::ostringstream text;
  text << timeline::op_name(e.op) << " " << e.name;
  if (e.op == timeline::Op::alloc || e.op == timeline::Op::free)
    text << " (" << runtime::category_name(e.category) << ", " << e.bytes << " bytes)";
  return text.str();
}

// "" when equal, else where the two first differ.
std::string first_difference(const timeline::Timeline& predicted,
                             const timeline::Timeline& measured) {
  if (predicted.start_bytes != measured.start_bytes) return "the bytes live at the start differ";
  const size_t n = std::min(predicted.events.size(), measured.events.size());
  for (size_t i = 0; i < n; ++i) {
    if (predicted.events[i] == measured.events[i]) continue;
    return "event " + std::to_string(i) + ": predicted " + describe(predicted.events[i]) +
           ", measured " + describe(measured.events[i]);
  }
  if (predicted.events.size() != measured.events.size()) {
    return "predicted " + std::to_string(predicted.events.size()) + " events, measured " +
           std::to_string(measured.events.size());
  }
  return "";
}

int64_t count(const timeline::Timeline& t, timeline::Op op, const std::string& name_prefix) {
  int64_t n = 0;
  for (const timeline::Event& e : t.events)
    if (e.op == op && e.name.starts_with(name_prefix)) ++n;
  return n;
}

TEST(MemoryTimeline, PredictedEqualsMeasuredEventForEvent) {
  if (world_size() != 4) GTEST_SKIP() << "a 4-rank layout";
  mpi_test::SharedData shared;
  const emulated::Device registered;
  const std::vector<std::string> layout = {
      "parallel.tensor=2",
      "parallel.pipeline=2",
      "parallel.virtual_pipeline=2",
      "model.num_layers=8",
      "recompute.granularity=selective",
      "recompute.modules=[core_attn]",
      "recompute.layers=[{range: [2, 3], granularity: full}, {range: [6, 7], granularity: none}]"};
  for (const bool device : {false, true}) {
    std::vector<std::string> overrides = layout;
    if (device) overrides.insert(overrides.end(), {"train.device=cuda", "train.precision=bf16"});
    const trainer::Config config = mpi_test::config_for(shared, overrides);
    const char* where = device ? "emulated device" : "cpu";
    mpi_test::Run run(config, true, device);
    run.trainer->train_step();
    timeline::start(*run.allocator);
    run.trainer->train_step();
    const timeline::Timeline measured = timeline::stop();
    timeline::Timeline predicted;
    trainer::predict_rank_memory(config, world_rank(), &predicted);

    const std::string difference = first_difference(predicted, measured);
    EXPECT_TRUE(all_ranks(difference.empty()))
        << where << ", rank " << world_rank() << ": " << difference;
    // What makes the comparison worth having: stash tensors by name, every microbatch's
    // forward and backward, recompute phases (selective on every rank, full groups on pp 1),
    // and no storage left unnamed.
    const bool pp1 = world_rank() >= 2;
    EXPECT_TRUE(all_ranks(count(measured, timeline::Op::alloc, "ln1_out") > 0 &&
                          count(measured, timeline::Op::begin, "forward chunk") == 8 &&
                          count(measured, timeline::Op::begin, "backward chunk") == 8 &&
                          count(measured, timeline::Op::begin, "recompute L") > 0 &&
                          (!pp1 || count(measured, timeline::Op::begin, "recompute L2") == 4) &&
                          count(measured, timeline::Op::alloc, timeline::kUnnamed) == 0))
        << where << ", rank " << world_rank();
    if (world_rank() == 0) {
      std::printf("[ timeline ] %s: rank 0 step 2, %zu events, predicted == measured: %s\n", where,
                  measured.events.size(), difference.empty() ? "yes" : "no");
    }
  }
}

}  // namespace
