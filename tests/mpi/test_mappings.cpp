// Each tensor/sequence-parallel mapping pair alone over the whole world, with
// expected values computed from rank ids; and the rank layout of ProcessGroups.
#include <gtest/gtest.h>

#include <vector>

#include "mpi_test_util.h"
#include "parallel/core/mappings.h"
#include "parallel/core/process_groups.h"
#include "runtime/kernels/cpu/convert.h"

namespace {

using mpi_test::world_rank;
using mpi_test::world_size;

using runtime::Tensor;

runtime::CpuAllocator& allocator() {
  static runtime::CpuAllocator instance;
  return instance;
}

// A host f32 tensor holding `values`.
Tensor tensor(const std::vector<float>& values) {
  Tensor t = Tensor::empty(allocator(), {static_cast<int64_t>(values.size())}, runtime::DType::f32,
                           runtime::MemoryCategory::activation);
  std::copy(values.begin(), values.end(), t.f32());
  return t;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

std::unique_ptr<parallel::ProcessGroups> world_as_tp() {
  parallel::ParallelConfig config;
  config.tensor = world_size();
  return std::make_unique<parallel::ProcessGroups>(parallel::ProcessGroups::from_mpi(config));
}

TEST(Mappings, CopyToTpBackwardSumsGradients) {
  auto groups = world_as_tp();
  const int r = world_rank(), n = world_size();
  const Tensor grad_tensor = tensor({static_cast<float>(r + 1), static_cast<float>(10 * r)});
  parallel::copy_to_tp_backward(*groups->tp, grad_tensor);
  const std::vector<float> grad = values(grad_tensor);
  EXPECT_EQ(grad[0], n * (n + 1) / 2.0f);
  EXPECT_EQ(grad[1], 10.0f * n * (n - 1) / 2.0f);
}

TEST(Mappings, ReduceFromTpForwardSumsPartials) {
  auto groups = world_as_tp();
  const int r = world_rank(), n = world_size();
  const Tensor partial = tensor(std::vector<float>(3, static_cast<float>(r)));
  parallel::reduce_from_tp_forward(*groups->tp, partial);
  for (float v : values(partial)) EXPECT_EQ(v, n * (n - 1) / 2.0f);
}

TEST(Mappings, GatherFromSpConcatenatesShardsAndScattersGradients) {
  auto groups = world_as_tp();
  const int r = world_rank(), n = world_size();
  const int64_t shard = 3;
  std::vector<float> mine(shard), full(static_cast<size_t>(shard * n));
  for (int64_t i = 0; i < shard; ++i) mine[static_cast<size_t>(i)] = 100.0f * r + i;
  const Tensor full_tensor = tensor(full);
  parallel::gather_from_sp_forward(*groups->tp, full_tensor, tensor(mine));
  full = values(full_tensor);
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < shard; ++i)
      EXPECT_EQ(full[static_cast<size_t>(q * shard + i)], 100.0f * q + i);
  // backward: dshard = chunk r of the sum over ranks of dfull; dfull[j] = j + rank
  std::vector<float> dfull(full.size()), dshard(static_cast<size_t>(shard));
  for (size_t j = 0; j < dfull.size(); ++j) dfull[j] = static_cast<float>(j) + r;
  const Tensor dshard_tensor = tensor(dshard);
  parallel::gather_from_sp_backward(*groups->tp, dshard_tensor, tensor(dfull));
  dshard = values(dshard_tensor);
  for (int64_t i = 0; i < shard; ++i) {
    const float j = static_cast<float>(r * shard + i);
    EXPECT_EQ(dshard[static_cast<size_t>(i)], n * j + n * (n - 1) / 2.0f);
  }
}

TEST(Mappings, ReduceScatterToSpSumsPartialsAndGathersGradients) {
  auto groups = world_as_tp();
  const int r = world_rank(), n = world_size();
  const int64_t shard = 2;
  std::vector<float> partial(static_cast<size_t>(shard * n)), mine(static_cast<size_t>(shard));
  for (size_t j = 0; j < partial.size(); ++j) partial[j] = static_cast<float>(j * (r + 1));
  const Tensor mine_tensor = tensor(mine);
  parallel::reduce_scatter_to_sp_forward(*groups->tp, mine_tensor, tensor(partial));
  mine = values(mine_tensor);
  for (int64_t i = 0; i < shard; ++i) {
    const float j = static_cast<float>(r * shard + i);
    EXPECT_EQ(mine[static_cast<size_t>(i)], j * n * (n + 1) / 2.0f);
  }
  std::vector<float> dfull(partial.size());
  const std::vector<float> dmine = {static_cast<float>(r), static_cast<float>(-r)};
  const Tensor dfull_tensor = tensor(dfull);
  parallel::reduce_scatter_to_sp_backward(*groups->tp, dfull_tensor, tensor(dmine));
  dfull = values(dfull_tensor);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(dfull[static_cast<size_t>(2 * q)], static_cast<float>(q));
    EXPECT_EQ(dfull[static_cast<size_t>(2 * q + 1)], static_cast<float>(-q));
  }
}

// bf16 activations under tensor parallelism: MPI has no bf16, so sums add in f32 and round
// to bf16 at each step (here every partial sum is exact in bf16, so the result is too).
TEST(Mappings, Bf16SumsAndGathersOverMpi) {
  auto groups = world_as_tp();
  const int r = world_rank(), n = world_size();
  const int64_t shard = 4;
  Tensor partial = Tensor::empty(allocator(), {shard * n}, runtime::DType::bf16,
                                 runtime::MemoryCategory::activation);
  for (int64_t j = 0; j < shard * n; ++j)
    partial.data<uint16_t>()[j] = runtime::cpu::float_to_bf16(static_cast<float>(j + r));
  Tensor mine = Tensor::empty(allocator(), {shard}, runtime::DType::bf16,
                              runtime::MemoryCategory::activation);
  parallel::reduce_scatter_to_sp_forward(*groups->tp, mine, partial);
  for (int64_t i = 0; i < shard; ++i) {
    const float j = static_cast<float>(r * shard + i);
    EXPECT_EQ(runtime::cpu::bf16_to_float(mine.data<uint16_t>()[i]), n * j + n * (n - 1) / 2.0f);
  }
  parallel::reduce_from_tp_forward(*groups->tp, partial);
  for (int64_t j = 0; j < shard * n; ++j) {
    EXPECT_EQ(runtime::cpu::bf16_to_float(partial.data<uint16_t>()[j]),
              n * static_cast<float>(j) + n * (n - 1) / 2.0f);
  }
  Tensor full = Tensor::empty(allocator(), {shard * n}, runtime::DType::bf16,
                              runtime::MemoryCategory::activation);
  parallel::gather_from_sp_forward(*groups->tp, full, mine);
  for (int64_t j = 0; j < shard * n; ++j)
    EXPECT_EQ(full.data<uint16_t>()[j], partial.data<uint16_t>()[j]);
}

TEST(ProcessGroups, TpFastestThenDpThenPp) {
  if (world_size() != 8) GTEST_SKIP() << "the 8-rank layout of process_groups.h";
  parallel::ParallelConfig config;
  config.tensor = config.data = config.pipeline = 2;
  parallel::ProcessGroups groups = parallel::ProcessGroups::from_mpi(config);
  const int r = world_rank();
  // Sum of world ranks in each group, from the table in process_groups.h.
  auto group_sum = [&](parallel::Communicator& c) {
    double v = r;
    c.all_reduce_sum(&v, 1);
    return v;
  };
  const int tp_base = r / 2 * 2, dp_base = r / 4 * 4 + r % 2, pp_base = r % 4;
  EXPECT_EQ(group_sum(*groups.tp), tp_base + tp_base + 1);
  EXPECT_EQ(group_sum(*groups.dp), dp_base + dp_base + 2);
  EXPECT_EQ(group_sum(*groups.pp), pp_base + pp_base + 4);
  EXPECT_EQ(groups.coordinates.tp, r % 2);
  EXPECT_EQ(groups.coordinates.dp, (r / 2) % 2);
  EXPECT_EQ(groups.coordinates.pp, r / 4);
  ASSERT_NE(groups.embedding, nullptr);  // 2 stages: every rank is first or last
  EXPECT_EQ(group_sum(*groups.embedding), pp_base + pp_base + 4);
}

}  // namespace
