// optimizer.distributed against the replicated optimizer in the same layout: losses over 5
// steps and the final master weights agree bit for bit with the same buckets and within 1e-6
// relative with other buckets (fp32 on the host, bf16 on the emulated device); every rank's
// payload and grad/optimizer/comm bytes equal the models'; and
// checkpoints written with sharded state resume at other dp sizes, with and without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "mpi_test_util.h"
#include "trainer/engine/distributed_optimizer.h"
#include "trainer/engine/optimizer_memory.h"

namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

using mpi_test::Layout;

// Hidden size 27 makes the parameter count odd (40257), so the gradient buffer ends in a
// staged tail bucket (Note [Gradient buckets]); the test model's other sizes divide by 8.
constexpr const char* kOddHidden = "model.hidden_size=27";
constexpr const char* kOddHeads = "model.num_attention_heads=3";

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {2, "dp2", {"parallel.data=2"}},
      {2, "dp2 staged tail", {"parallel.data=2", kOddHidden, kOddHeads}},
      {4, "dp4", {"parallel.data=4"}},
      {4, "dp4 staged tail", {"parallel.data=4", kOddHidden, kOddHeads}},
      {4,
       "tp2 dp2 sp",
       {"parallel.tensor=2", "parallel.data=2", "parallel.sequence_parallel=true"}},
      {4, "pp2 dp2", {"parallel.pipeline=2", "parallel.data=2"}},
      // Sharded over the dp x cp replicas.
      {4,
       "cp2 dp2 flash",
       {"parallel.context=2", "parallel.data=2", "model.attention_backend=flash"}},
      {8,
       "tp2 pp2 dp2 interleaved",
       {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2",
        "parallel.virtual_pipeline=2"}},
  };
  return all;
}

constexpr int kSteps = 5;

// A run's losses and this rank's final fp32 master weights (host copy); whether its payloads
// and its grad and optimizer peaks (of the last step) and comm bytes equal the models'.
struct Curve {
  std::vector<double> losses;
  std::vector<float> master;
  bool comm_as_predicted = true;
  bool memory_as_predicted = true;
};

Curve train(const trainer::Config& config, bool emulated_device) {
  mpi_test::Run run(config, true, emulated_device);
  // The optimizer's staging, before pipeline sends (the other users of `comm`) take any.
  const int64_t comm_at_start = run.allocator->stats()[runtime::MemoryCategory::comm].current;
  Curve curve;
  for (int s = 0; s < kSteps; ++s) {
    const trainer::StepMetrics m = run.trainer->train_step();
    curve.losses.push_back(m.loss);
    curve.comm_as_predicted = curve.comm_as_predicted && m.comm_bytes == m.predicted_comm_bytes;
  }
  const trainer::OptimizerMemory predicted = trainer::predict_optimizer_memory(
      config, run.trainer->stage_setup().shard, run.groups.dp->size(), run.groups.dp->rank());
  const runtime::AllocatorStats stats = run.allocator->stats();
  const int64_t measured[] = {stats[runtime::MemoryCategory::grad].peak,
                              stats[runtime::MemoryCategory::optimizer].peak, comm_at_start};
  const int64_t expected[] = {predicted.grad, predicted.optimizer, predicted.comm};
  for (int i = 0; i < 3; ++i) {
    curve.memory_as_predicted = curve.memory_as_predicted && measured[i] == expected[i];
    EXPECT_EQ(measured[i], expected[i])
        << "category " << i << " (grad, optimizer, comm) on rank " << world_rank();
  }
  const runtime::Tensor& master = run.trainer->host_params().flat;
  curve.master.assign(master.f32(), master.f32() + master.numel());
  return curve;
}

// Largest |a - b| / max |b|, over every rank.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  double worst = a.size() == b.size() ? diff / scale : 1e30;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

double loss_difference(const Curve& a, const Curve& b) {
  double worst = 0;
  for (size_t s = 0; s < b.losses.size(); ++s)
    worst = std::max(worst, std::abs(a.losses[s] - b.losses[s]) / b.losses[s]);
  return worst;
}

// Each layout: replicated, distributed, distributed in ~8 KiB buckets (several buckets and, as
// the buffer does not divide by dp, a staged tail).
void compare_layouts(const std::vector<std::string>& precision, bool emulated_device,
                     const char* label) {
  mpi_test::SharedData shared;
  for (const Layout& layout : layouts()) {
    if (layout.ranks != world_size()) continue;
    auto config = [&](std::vector<std::string> more) {
      std::vector<std::string> all = layout.overrides;
      all.insert(all.end(), precision.begin(), precision.end());
      all.insert(all.end(), more.begin(), more.end());
      all.push_back("train.steps=" + std::to_string(kSteps));
      return mpi_test::config_for(shared, all);
    };
    const Curve replicated = train(config({}), emulated_device);
    const Curve whole = train(config({"optimizer.distributed=true"}), emulated_device);
    const Curve bucketed =
        train(config({"optimizer.distributed=true", "optimizer.bucket_mb=0.008"}), emulated_device);
    const double loss[] = {loss_difference(whole, replicated),
                           loss_difference(bucketed, replicated)};
    const double weights[] = {relative_difference(whole.master, replicated.master),
                              relative_difference(bucketed.master, replicated.master)};
    if (world_rank() == 0) {
      std::printf(
          "[ %s ] %-24s distributed: losses %.1e weights %.1e; bucketed: losses %.1e "
          "weights %.1e (0: bit-identical)\n",
          label, layout.name, loss[0], weights[0], loss[1], weights[1]);
    }
    // Same buckets: the same collectives sum every element, so bit for bit. Other buckets: the
    // MPI library may sum in another order.
    EXPECT_EQ(whole.losses, replicated.losses) << layout.name;
    EXPECT_TRUE(all_ranks(whole.master == replicated.master)) << layout.name;
    EXPECT_LE(loss[1], 1e-6) << layout.name << " bucketed";
    EXPECT_LE(weights[1], 1e-6) << layout.name << " bucketed";
    EXPECT_TRUE(all_ranks(whole.comm_as_predicted && bucketed.comm_as_predicted &&
                          replicated.comm_as_predicted))
        << layout.name << ": payload differs from the model on rank " << world_rank();
    EXPECT_TRUE(all_ranks(whole.memory_as_predicted && bucketed.memory_as_predicted &&
                          replicated.memory_as_predicted))
        << layout.name << ": grad/optimizer/comm peaks differ from the model";
  }
}

TEST(DistributedOptimizer, EqualsReplicatedFp32) {
  compare_layouts({}, false, "fp32");
}

TEST(DistributedOptimizer, EqualsReplicatedBf16OnTheEmulatedDevice) {
  const emulated::Device registered;
  compare_layouts({"train.device=cuda", "train.precision=bf16"}, true, "bf16");
}

// Optimizer state per rank: the shard of every bucket, the same size on every dp rank, 1/dp of
// the whole within the tail bucket's padding (under one element per rank).
TEST(DistributedOptimizer, StateIsOneDpthPerRank) {
  if (world_size() != 4) GTEST_SKIP() << "dp 4";
  mpi_test::SharedData shared;
  mpi_test::Run run(
      mpi_test::config_for(shared, {"parallel.data=4", "optimizer.distributed=true",
                                    "optimizer.bucket_mb=0.008", kOddHidden, kOddHeads}),
      true);
  run.trainer->train_step();
  const int64_t numel = run.trainer->params().flat.numel();
  const int64_t state = run.allocator->stats()[runtime::MemoryCategory::optimizer].current;
  const auto layout = parallel::plan_grad_buckets(
      {.numel = numel, .bucket_numel = parallel::bucket_numel_of_mb(0.008), .dp_size = 4});
  EXPECT_EQ(state, 2 * layout.shard_numel * 4);
  EXPECT_TRUE(layout.has_staged_bucket());
  EXPECT_GT(layout.shard_numel * 4, numel);
  EXPECT_LT(layout.shard_numel * 4 - numel, 4) << "padding: under one element per rank";
}

// Resume across dp sizes and optimizers: dp4 distributed -> pp2 x dp2 distributed (bucketed)
// and one process replicated, and back; the next step's loss equals the uninterrupted run's
// within 1e-6. The odd parameter count puts a staged tail bucket in every distributed layout.
TEST(DistributedOptimizer, CheckpointsResumeAcrossDpSizes) {
  if (world_size() != 4) GTEST_SKIP() << "dp 4 and pp2 x dp2";
  mpi_test::SharedData shared;
  const std::vector<std::string> dp4 = {"parallel.data=4", "optimizer.distributed=true"};
  const std::vector<std::string> dp2 = {"parallel.pipeline=2", "parallel.data=2",
                                        "optimizer.distributed=true", "optimizer.bucket_mb=0.008"};
  auto with_dir = [&](std::vector<std::string> layout, const std::string& dir) {
    layout.insert(layout.end(), {kOddHidden, kOddHeads, "checkpoint.dir=" + shared.out(dir)});
    return mpi_test::config_for(shared, layout);
  };
  // Writers: dp4 distributed, and one replicated process; each continues one step.
  double continued_dp4 = 0, continued_single = 0;
  {
    mpi_test::Run run(with_dir(dp4, "from_dp4"), true);
    run.trainer->train_step();
    run.trainer->train_step();
    run.trainer->save_checkpoint();
    continued_dp4 = run.trainer->train_step().loss;
  }
  if (world_rank() == 0) {
    mpi_test::Run single(with_dir({}, "from_single"), false);
    single.trainer->train_step();
    single.trainer->train_step();
    single.trainer->save_checkpoint();
    continued_single = single.trainer->train_step().loss;
  }
  MPI_Bcast(&continued_single, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  auto resumed_loss = [&](const trainer::Config& config, bool world) {
    mpi_test::Run run(config, world);
    EXPECT_TRUE(run.trainer->resume("auto"));
    return run.trainer->train_step().loss;
  };
  auto relative = [](double a, double b) { return std::abs(a - b) / b; };
  // dp4 distributed -> pp2 x dp2 distributed (bucketed) and -> one process replicated.
  EXPECT_LT(relative(resumed_loss(with_dir(dp2, "from_dp4"), true), continued_dp4), 1e-6);
  if (world_rank() == 0) {
    EXPECT_LT(relative(resumed_loss(with_dir({}, "from_dp4"), false), continued_dp4), 1e-6);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // one process replicated -> dp4 and pp2 x dp2 distributed.
  EXPECT_LT(relative(resumed_loss(with_dir(dp4, "from_single"), true), continued_single), 1e-6);
  EXPECT_LT(relative(resumed_loss(with_dir(dp2, "from_single"), true), continued_single), 1e-6);
  // pp2 x dp2 distributed -> dp4 distributed.
  double continued_dp2 = 0;
  {
    mpi_test::Run run(with_dir(dp2, "from_dp2"), true);
    run.trainer->train_step();
    run.trainer->train_step();
    run.trainer->save_checkpoint();
    continued_dp2 = run.trainer->train_step().loss;
  }
  EXPECT_LT(relative(resumed_loss(with_dir(dp4, "from_dp2"), true), continued_dp2), 1e-6);
}

}  // namespace
