// Host CUDA's state shared between the kernel engine and the runtime API: the device's limits,
// the launch error cudaGetLastError reports and the kernels' opted-in dynamic shared memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace host_cuda {

// The emulated device's limits (an H200's): what cudaGetDeviceProperties reports and what a
// launch is checked against.
constexpr unsigned kMaxBlockThreads = 1024;
constexpr unsigned kMaxBlockZ = 64;
constexpr unsigned kMaxGridYZ = 65535;
constexpr size_t kDefaultSharedBytes = size_t{48} << 10;  // without an opt-in
constexpr size_t kSharedOptInBytes = 232448;              // 227 KiB, the most a kernel may opt in

// Keeps `error` for the next cudaGetLastError / cudaPeekAtLastError (the first one sticks).
void record_launch_error(cudaError_t error);
// The dynamic shared memory `kernel` opted in to (cudaFuncAttributeMaxDynamicSharedMemorySize),
// 0 if none.
size_t opted_in_shared_bytes(const void* kernel);

}  // namespace host_cuda
