// A device that is host memory, for running the trainer's device path without a GPU: an
// allocator whose tensors say DeviceKind::cuda, and the host kernels registered as the device
// backend. Uploads, downloads, host staging of collectives, master/compute weights, device
// checkpoints and gathers all run on the CPU with the CPU's kernels, so a run must equal the
// host run bit for bit; and device memory is inaccessible to the host outside device ops
// (Note [Emulated device memory]), so host code that touches a device tensor faults here as
// it would fail on a GPU. bf16 tensors are computed in f32 and rounded per op, the GPU's
// precision model (Note [Emulated bf16] in the .cpp). Not covered: the CUDA kernels.
#pragma once

#include <cstdint>

#include "runtime/allocator.h"

namespace emulated {

// Note [Emulated device memory]
// Every emulated device tensor lives in one reserved address range that stays PROT_NONE
// except while an Access is alive. The registered device backend opens one around each op,
// exactly the calls that may touch device memory on a GPU; anything else that reads or
// writes a device tensor's memory (a host loop over grads, a memcpy, MPI handed a device
// pointer) gets SIGSEGV, and the test binary dies naming nothing but the fault, which is
// the point: such code is wrong on a GPU.

// Device memory readable and writable while alive (nesting and threads allowed): the device
// ops, and stand-ins for libraries that read device buffers (NCCL) in tests.
class Access {
 public:
  Access();
  ~Access();
  Access(const Access&) = delete;
  Access& operator=(const Access&) = delete;
};

// Caching allocator over the reserved range, with exact per-category statistics.
class DeviceAllocator final : public runtime::StatsAllocator {
 public:
  ~DeviceAllocator() override;

  runtime::DeviceKind device() const override { return runtime::DeviceKind::cuda; }
  void* allocate(int64_t bytes, runtime::MemoryCategory category) override;
  void deallocate(void* ptr, int64_t bytes, runtime::MemoryCategory category) override;
};

// Registers the guarded host kernels as the device backend for its lifetime.
class Device {
 public:
  Device();
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

}  // namespace emulated
