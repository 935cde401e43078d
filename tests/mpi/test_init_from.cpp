// train.init_from across ranks: a Hugging Face Llama checkpoint checked against the whole model
// from its headers, then read by each rank for the parameters it holds alone, gives the run that
// one process initialised from the same file gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mpi_test_util.h"
#include "trainer/export/safetensors.h"

namespace {

using mpi_test::world_rank;
using mpi_test::world_size;

// tensor 2 x pipeline 2: each rank reads its stage's tensors (the stages' are disjoint with an
// untied head), of a split one only its rows (kv groups, gate or up rows, vocabulary part) or its
// columns (o_proj, down_proj), so the four ranks together read the file once and the norms a
// second time; and each rank's first two losses are one process's within 1e-5.
TEST(InitFrom, LlamaRanksReadTheirOwnParametersAndMatchOneProcess) {
  if (world_size() != 4) GTEST_SKIP() << "a tp2 x pp2 layout on 4 ranks";
  mpi_test::SharedData shared;
  auto config = [&](const std::string& out, std::vector<std::string> more) {
    more.insert(more.begin(), {"model.architecture=llama", "model.num_query_groups=2",
                               "model.ffn_hidden_size=48", "output.dir=" + shared.out(out)});
    return mpi_test::config_for(shared, more);
  };
  const std::string weights = shared.out("trained") + "/model.safetensors";
  double one_process[2] = {};
  if (world_rank() == 0) {
    {
      mpi_test::Run trained(config("trained", {"train.steps=2", "output.export=true"}), false);
      trained.trainer->run();
    }
    mpi_test::Run single(config("single", {"train.seed=7"}), false);
    single.trainer->init_from(weights);
    for (double& loss : one_process) loss = single.trainer->train_step().loss;
  }
  MPI_Bcast(one_process, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  mpi_test::Run run(config("tp2pp2", {"train.seed=7", "parallel.tensor=2", "parallel.pipeline=2"}),
                    true);
  const int64_t read = run.trainer->init_from(weights);
  for (int step = 0; step < 2; ++step) {
    const double loss = run.trainer->train_step().loss;
    EXPECT_LT(std::abs(loss - one_process[step]) / one_process[step], 1e-5) << "step " << step + 1;
  }
  // The export is F32: a split parameter costs its rows (those below the vocabulary of the
  // embeddings and the head) or its columns, any other its whole tensor.
  const int64_t vocab = run.trainer->config().model.vocab_size;
  int64_t expected = 0;
  for (const model::NamedParam& p : run.trainer->params().named) {
    int64_t elements = runtime::shape_numel(p.global_shape);
    if (p.shard_dim == 0) {
      const int64_t rows = p.roles.vocab_padded
                               ? std::clamp<int64_t>(vocab - p.shard_offset, 0, p.tensor.dim(0))
                               : p.tensor.dim(0);
      elements = rows * (p.tensor.numel() / p.tensor.dim(0));
    }
    if (p.shard_dim == 1) elements = p.tensor.numel();
    expected += 4 * elements;
  }
  EXPECT_EQ(read, expected) << "rank " << world_rank();
  int64_t stored = 0;
  for (const auto& [name, entry] :
       trainer::read_safetensors(weights, trainer::SafetensorsRead::header).tensors)
    stored += runtime::shape_numel(entry.shape) * trainer::safetensors_dtype_size(entry.dtype);
  int64_t together = 0;
  MPI_Allreduce(&read, &together, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(together, stored);
  EXPECT_LT(together, stored + stored / 10);  // the replicated norms, read by both tp ranks
  if (world_rank() == 0)
    std::printf("[ init_from] tp2 x pp2: rank 0 read %lld of %lld bytes, the ranks together %lld\n",
                static_cast<long long>(read), static_cast<long long>(stored),
                static_cast<long long>(together));
}

}  // namespace
