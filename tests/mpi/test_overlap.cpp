// optimizer.overlap_grad_reduce: gradient buckets reduced while backward runs give the losses
// and final weights of reducing them after backward bit for bit (memcmp), for the replicated and
// the distributed optimizer, in dp, tp x dp, pp x dp (1F1B) and interleaved layouts with many
// buckets, in fp32 and in bf16 on the emulated device; and with overlap on the buckets do start
// before backward ends (off: none does).
#include <gtest/gtest.h>

#include <cstring>

#include "mpi_test_util.h"

namespace {

using mpi_test::all_ranks;
using mpi_test::Layout;
using mpi_test::world_rank;
using mpi_test::world_size;

// The group's communicator with a count of the reduce-scatters started between the start of a
// step (the test sets in_schedule) and the step's first f64 all-reduce over dp: the trainer's
// loss sum, right after the step's schedule returns.
class CountingCommunicator final : public parallel::Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<parallel::Communicator> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int64_t payload_bytes() const override { return inner_->payload_bytes(); }
  // Reduce-scatters started while the schedule ran, summed over the steps so far.
  int64_t started_in_backward = 0;
  bool in_schedule = false;

 private:
  void do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) override {
    inner_->all_reduce_sum(data, count, dtype);
  }
  void do_all_reduce_sum_f64_buffer(double* data, int64_t count) override {
    in_schedule = false;
    inner_->all_reduce_sum(data, count);
  }
  void do_all_reduce_max_buffer(float* data, int64_t count) override {
    inner_->all_reduce_max(data, count);
  }
  void do_all_gather_buffer(void* out, const void* in, int64_t count,
                            runtime::DType dtype) override {
    inner_->all_gather(out, in, count, dtype);
  }
  void do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                runtime::DType dtype) override {
    inner_->reduce_scatter(out, in, count, dtype);
  }
  void do_broadcast(void* data, int64_t bytes, int root) override {
    inner_->broadcast(data, bytes, root);
  }
  void do_barrier() override { inner_->barrier(); }
  std::unique_ptr<parallel::Request> do_send_async_buffer(const void* data, int64_t bytes, int peer,
                                                          int tag) override {
    return inner_->send_async(data, bytes, peer, tag);
  }
  void do_recv_buffer(void* data, int64_t bytes, int peer, int tag) override {
    inner_->recv(data, bytes, peer, tag);
  }
  std::unique_ptr<parallel::Request> do_reduce_scatter_async_buffer(void* out, const void* in,
                                                                    int64_t count,
                                                                    runtime::DType dtype) override {
    if (in_schedule) ++started_in_backward;
    return inner_->reduce_scatter_async(out, in, count, dtype);
  }
  std::unique_ptr<parallel::Request> do_all_gather_async_buffer(void* out, const void* in,
                                                                int64_t count,
                                                                runtime::DType dtype) override {
    return inner_->all_gather_async(out, in, count, dtype);
  }

  std::unique_ptr<parallel::Communicator> inner_;
};

// Hidden size 27 (with 3 heads) makes the parameter count odd: a staged tail bucket.
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {2, "dp2", {"parallel.data=2"}},
      {2,
       "dp2 staged tail",
       {"parallel.data=2", "model.hidden_size=27", "model.num_attention_heads=3"}},
      {4, "dp4", {"parallel.data=4"}},
      {4,
       "tp2 dp2 sp",
       {"parallel.tensor=2", "parallel.data=2", "parallel.sequence_parallel=true"}},
      {4, "pp2 dp2 1F1B", {"parallel.pipeline=2", "parallel.data=2"}},
      {4,
       "pp2 dp2 interleaved",
       {"parallel.pipeline=2", "parallel.data=2", "parallel.virtual_pipeline=2"}},
      // Averaged over the dp x cp replicas.
      {4,
       "cp2 dp2 flash",
       {"parallel.context=2", "parallel.data=2", "model.attention_backend=flash"}},
      {8,
       "tp2 pp2 dp2 il. sp",
       {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2",
        "parallel.virtual_pipeline=2", "parallel.sequence_parallel=true"}},
  };
  return all;
}

struct Result {
  std::vector<double> losses;
  std::vector<float> weights;  // this rank's final fp32 master weights
  int64_t started_in_backward = 0;
};

Result train(const trainer::Config& config, bool emulated_device) {
  CountingCommunicator* counting = nullptr;
  mpi_test::Run run(config, true, emulated_device, [&](parallel::ProcessGroups& groups) {
    auto wrapped = std::make_unique<CountingCommunicator>(std::move(groups.dp));
    counting = wrapped.get();
    groups.dp = std::move(wrapped);
  });
  Result result;
  for (int64_t s = 0; s < config.train.steps; ++s) {
    counting->in_schedule = true;
    result.losses.push_back(run.trainer->train_step().loss);
  }
  const runtime::Tensor& master = run.trainer->host_params().flat;
  result.weights.assign(master.f32(), master.f32() + master.numel());
  result.started_in_backward = counting->started_in_backward;
  return result;
}

bool same_bits(const Result& a, const Result& b) {
  return a.losses.size() == b.losses.size() && a.weights.size() == b.weights.size() &&
         std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(double)) == 0 &&
         std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)) == 0;
}

// Every layout of `world_size()` ranks, both optimizers.
void compare(const std::vector<std::string>& precision, bool emulated_device, const char* label) {
  mpi_test::SharedData shared;
  for (const Layout& layout : layouts()) {
    if (layout.ranks != world_size()) continue;
    for (const bool distributed : {false, true}) {
      auto config = [&](bool overlap) {
        std::vector<std::string> all = layout.overrides;
        all.insert(all.end(), precision.begin(), precision.end());
        all.insert(all.end(),
                   {"optimizer.bucket_mb=0.008", "train.steps=3",
                    std::string("optimizer.distributed=") + (distributed ? "true" : "false"),
                    std::string("optimizer.overlap_grad_reduce=") + (overlap ? "true" : "false")});
        return mpi_test::config_for(shared, all);
      };
      const Result after = train(config(false), emulated_device);
      const Result overlapped = train(config(true), emulated_device);
      const char* optimizer = distributed ? "distributed" : "replicated";
      if (world_rank() == 0) {
        std::printf("[ %s ] %-22s %-11s buckets started in backward: %lld on rank 0\n", label,
                    layout.name, optimizer, static_cast<long long>(overlapped.started_in_backward));
      }
      EXPECT_TRUE(all_ranks(same_bits(overlapped, after)))
          << layout.name << " " << optimizer << ": overlap changes losses or weights";
      EXPECT_TRUE(all_ranks(after.started_in_backward == 0))
          << layout.name << " " << optimizer << ": a bucket started during backward with "
          << "overlap off";
      EXPECT_TRUE(all_ranks(overlapped.started_in_backward > 0))
          << layout.name << " " << optimizer << ": no bucket started during backward";
    }
  }
}

TEST(OverlappedGradReduce, BitIdenticalToReducingAfterBackward) {
  compare({}, false, "fp32");
}

// Device tensors through MPI: staged host copies, uploaded when a collective is waited for.
TEST(OverlappedGradReduce, BitIdenticalBf16OnTheEmulatedDevice) {
  const emulated::Device registered;
  compare({"train.device=cuda", "train.precision=bf16"}, true, "bf16");
}

}  // namespace
