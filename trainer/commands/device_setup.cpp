#include "trainer/commands/device_setup.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#ifdef TRAINER_WITH_CUDA
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device.h"
#endif
#include "runtime/error.h"
#include "trainer/run/train.h"

namespace trainer::commands {

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

void report_and_abort(const std::exception& error, int world_rank, int world_size) {
  std::fprintf(stderr, "[rank %d] error: %s\n", world_rank, error.what());
  std::fflush(stderr);
  if (world_size > 1) parallel::abort_job(1);
}

#ifdef TRAINER_WITH_CUDA
struct RunDevice::Gpu {
  std::unique_ptr<runtime::cuda::CudaContext> context;
};

namespace {

// How many different GPUs the job's ranks use, by UUID (collective over the world group): NCCL
// needs a GPU per rank, and all ranks must choose alike.
int64_t count_distinct_gpus(parallel::ProcessGroups& groups) {
  const auto uuid = runtime::cuda::current_device_uuid();
  const size_t world_size = static_cast<size_t>(groups.world_size());
  std::vector<unsigned char> uuids(uuid.size() * world_size);
  groups.world->all_gather(uuids.data(), uuid.data(), static_cast<int64_t>(uuid.size()),
                           runtime::DType::u8);
  std::set<std::string> distinct;
  for (size_t r = 0; r < world_size; ++r)
    distinct.emplace(reinterpret_cast<const char*>(uuids.data()) + r * uuid.size(), uuid.size());
  return static_cast<int64_t>(distinct.size());
}

}  // namespace

void RunDevice::set_up_gpu(int local_rank) {
  runtime::cuda::select_device_for_local_rank(local_rank);
  gpu_ = std::make_unique<Gpu>();
  gpu_->context = std::make_unique<runtime::cuda::CudaContext>();
  runtime::cuda::register_cuda_backend(*gpu_->context);
  allocator_ = std::make_unique<runtime::cuda::CudaAllocator>();
  gpu_->context->use_allocator(allocator_.get());  // declared first: outlives the context
}

void RunDevice::set_up(const Config& config, parallel::ProcessGroups& groups, int local_rank) {
  if (config.train.device == Device::cuda) {
    set_up_gpu(local_rank);
    const int64_t world_size = groups.world_size();
    if (resolve_comm_backend(config, world_size, count_distinct_gpus(groups)) ==
        parallel::CommBackend::nccl) {
      parallel::use_nccl_for_device_tensors(groups, gpu_->context->stream());
      if (groups.is_logging_rank()) std::cout << "communication: NCCL for device tensors\n";
    } else if (world_size > 1 && groups.is_logging_rank()) {
      std::cout << "communication: MPI, device tensors staged through host memory\n";
    }
  }
  if (!allocator_) allocator_ = std::make_unique<runtime::CpuAllocator>();
}
#else
struct RunDevice::Gpu {};

void RunDevice::set_up_gpu(int) {
  throw runtime::InputError("generate: --device cuda, but this trainer was built without CUDA");
}

void RunDevice::set_up(const Config&, parallel::ProcessGroups&, int) {
  allocator_ = std::make_unique<runtime::CpuAllocator>();
}
#endif

RunDevice::RunDevice() = default;
RunDevice::~RunDevice() = default;

}  // namespace trainer::commands
