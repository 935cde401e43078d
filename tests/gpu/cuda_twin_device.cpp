// The twin device of the GPU binary: CUDA device 0 with a CudaContext registered as the device
// backend and the caching allocator; not exact, so each row's tolerance applies (Note [Twin
// tolerance]). Without a device, make_twin_device returns null and every twin skips.
#include <cuda_runtime.h>

#include <memory>

#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device.h"
#include "tests/unit/ops/twin_harness.h"

namespace op_twins {
namespace {

class CudaTwinDevice final : public TwinDevice {
 public:
  CudaTwinDevice() { runtime::cuda::register_cuda_backend(context_); }

  runtime::Allocator& allocator() override { return allocator_; }
  bool exact() const override { return false; }

 private:
  runtime::cuda::CudaContext context_;  // unregisters the backend when destroyed, last
  runtime::cuda::CudaAllocator allocator_;
};

}  // namespace

std::unique_ptr<TwinDevice> make_twin_device() {
  if (runtime::cuda::device_count() == 0) return nullptr;
  TRAINER_CUDA_CHECK(cudaSetDevice(0));
  return std::make_unique<CudaTwinDevice>();
}

}  // namespace op_twins
