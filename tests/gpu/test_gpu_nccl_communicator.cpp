// NcclCommunicator in a world of one rank (bootstrapped through SelfCommunicator): every
// collective's result is known exactly (sums and maxima of one rank are the input, gathers and
// scatters are copies), point to point refused without a ring neighbour, and the payload
// counters; non-blocking collectives ordered by the compute stream. Skips without a device.
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/core/communicator.h"
#include "parallel/core/nccl_communicator.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class NcclCommunicatorTest : public gpu_test::GpuTest {};

template <typename T>
bool identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_F(NcclCommunicatorTest, ReportsRankAndSizeOfTheBootstrapGroup) {
  parallel::SelfCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap);
  EXPECT_EQ(nccl.rank(), 0);
  EXPECT_EQ(nccl.size(), 1);
  EXPECT_EQ(nccl.payload_bytes(), 0);
}

TEST_F(NcclCommunicatorTest, ReductionsOfOneRankKeepTheInput) {
  parallel::SelfCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap);
  const int64_t count = 1000;
  const std::vector<float> values = gpu_test::random_vector(count, 61, 100.f);

  DeviceBuffer<float> sum(values);
  nccl.all_reduce_sum(sum.data(), count);
  EXPECT_TRUE(identical(sum.download(), values));
  EXPECT_EQ(nccl.payload_bytes(), count * 4);

  DeviceBuffer<float> max(values);
  nccl.all_reduce_max(max.data(), count);
  EXPECT_TRUE(identical(max.download(), values));
  EXPECT_EQ(nccl.payload_bytes(), 2 * count * 4);

  std::vector<double> doubles(static_cast<size_t>(count));
  for (size_t i = 0; i < doubles.size(); ++i) doubles[i] = 1e-3 * values[i] + 1e10;  // needs f64
  DeviceBuffer<double> sum_f64(doubles);
  nccl.all_reduce_sum(sum_f64.data(), count);
  EXPECT_TRUE(identical(sum_f64.download(), doubles));
  EXPECT_EQ(nccl.payload_bytes(), 2 * count * 4 + count * 8);
}

TEST_F(NcclCommunicatorTest, GatherAndScatterOfOneRankCopy) {
  parallel::SelfCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap);
  const int64_t count = 777;
  const std::vector<float> values = gpu_test::random_vector(count, 62);

  DeviceBuffer<float> in(values), out(std::vector<float>(count, -1.f));
  nccl.all_gather(out.data(), in.data(), count);
  EXPECT_TRUE(identical(out.download(), values));
  EXPECT_EQ(nccl.payload_bytes(), count * 4);

  DeviceBuffer<float> scattered(std::vector<float>(count, -1.f));
  nccl.reduce_scatter(scattered.data(), in.data(), count);
  EXPECT_TRUE(identical(scattered.download(), values));
  EXPECT_EQ(nccl.payload_bytes(), 2 * count * 4);
}

TEST_F(NcclCommunicatorTest, BroadcastAndBarrier) {
  parallel::SelfCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap);
  std::vector<uint8_t> bytes(333);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  DeviceBuffer<uint8_t> data(bytes);
  nccl.broadcast(data.data(), static_cast<int64_t>(bytes.size()), 0);
  EXPECT_TRUE(identical(data.download(), bytes));
  nccl.barrier();
  nccl.barrier();
  EXPECT_EQ(nccl.payload_bytes(), 0);  // as the MPI one: broadcast and barrier add nothing
}

// Point to point runs over per-direction channels to ring neighbours (Note [NCCL point to
// point]); a group of one has none, so a send or receive is refused naming the peer. (Two
// ranks need two GPUs: the channels are exercised by multi-GPU runs only.)
TEST_F(NcclCommunicatorTest, PointToPointNeedsARingNeighbour) {
  parallel::SelfCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap, nullptr, /*ring_point_to_point=*/true);
  DeviceBuffer<float> buffer(std::vector<float>{1.f});
  try {
    nccl.send_async(buffer.data(), 4, 0, 0);
    FAIL() << "a send to oneself was accepted";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("only ring neighbours"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(nccl.recv(buffer.data(), 4, 0, 0), std::logic_error);
  EXPECT_EQ(nccl.payload_bytes(), 0);
}

// Non-blocking collectives (Note [NCCL non-blocking collectives]): queued after the compute
// stream's work so far, and the compute stream waits for them in the request's wait(). A kernel
// queued on the compute stream before the call fills the input; the result must hold it.
TEST_F(NcclCommunicatorTest, NonBlockingCollectivesAreOrderedByTheComputeStream) {
  cudaStream_t compute = nullptr;
  TRAINER_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  {
    parallel::SelfCommunicator bootstrap;
    parallel::NcclCommunicator nccl(bootstrap, compute);
    const int64_t count = 4096;
    const std::vector<float> values = gpu_test::random_vector(count, 63);
    DeviceBuffer<float> source(values), in(std::vector<float>(count, 0.f));
    DeviceBuffer<float> gathered(std::vector<float>(count, -1.f));
    TRAINER_CUDA_CHECK(cudaMemcpyAsync(in.data(), source.data(), count * sizeof(float),
                                       cudaMemcpyDeviceToDevice, compute));
    std::unique_ptr<parallel::Request> scatter =
        nccl.reduce_scatter_async(in.data(), in.data(), count, runtime::DType::f32);
    scatter->wait();
    std::unique_ptr<parallel::Request> gather =
        nccl.all_gather_async(gathered.data(), in.data(), count, runtime::DType::f32);
    gather->wait();
    TRAINER_CUDA_CHECK(cudaStreamSynchronize(compute));
    EXPECT_TRUE(identical(in.download(), values));
    EXPECT_TRUE(identical(gathered.download(), values));
    EXPECT_TRUE(gather->done());
    EXPECT_EQ(nccl.payload_bytes(), 2 * count * 4);
  }
  TRAINER_CUDA_CHECK(cudaStreamDestroy(compute));
}

TEST_F(NcclCommunicatorTest, EmptyCollectivesReturn) {
  parallel::SelfCommunicator bootstrap;
  parallel::NcclCommunicator nccl(bootstrap);
  DeviceBuffer<float> buffer(std::vector<float>{1.f});
  nccl.all_reduce_sum(buffer.data(), 0);
  nccl.all_reduce_max(buffer.data(), 0);
  nccl.all_gather(buffer.data(), buffer.data(), 0);
  nccl.reduce_scatter(buffer.data(), buffer.data(), 0);
  nccl.broadcast(buffer.data(), 0, 0);
  EXPECT_EQ(buffer.download(), std::vector<float>{1.f});
  EXPECT_EQ(nccl.payload_bytes(), 0);
}

}  // namespace
