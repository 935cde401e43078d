// A device that is host memory, for running the trainer's device path without a GPU: an
// allocator whose tensors say DeviceKind::cuda, and the host kernels (ops::host_backend())
// registered as the device backend. Uploads, downloads, host staging of collectives, the
// master/compute weights, device checkpoints and gathers then all run on the CPU with the
// CPU's kernels, so a run must equal the host run bit for bit. What this cannot catch: a
// host dereference of device memory (it is host memory here), and bf16 (the host kernels
// are f32).
#pragma once

#include "runtime/allocator.h"
#include "runtime/ops.h"

namespace emulated {

class DeviceAllocator final : public runtime::Allocator {
 public:
  runtime::DeviceKind device() const override { return runtime::DeviceKind::cuda; }
  void* allocate(int64_t bytes, runtime::MemoryCategory category) override {
    return host_.allocate(bytes, category);
  }
  void deallocate(void* ptr, int64_t bytes, runtime::MemoryCategory category) override {
    host_.deallocate(ptr, bytes, category);
  }
  runtime::AllocatorStats stats() const override { return host_.stats(); }
  void reset_peaks() override { host_.reset_peaks(); }

 private:
  runtime::CpuAllocator host_;
};

// Registers the host kernels as the device backend for its lifetime.
class Device {
 public:
  Device() { runtime::ops::register_device_backend(&runtime::ops::host_backend()); }
  ~Device() { runtime::ops::register_device_backend(nullptr); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

}  // namespace emulated
