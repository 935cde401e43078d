// Host CUDA's state shared between the kernel engine and the runtime API: the launch error
// cudaGetLastError reports and the kernels' opted-in dynamic shared memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace host_cuda {

// Keeps `error` for the next cudaGetLastError / cudaPeekAtLastError (the first one sticks).
void record_launch_error(cudaError_t error);
// The dynamic shared memory `kernel` opted in to (cudaFuncAttributeMaxDynamicSharedMemorySize),
// 0 if none.
size_t opted_in_shared_bytes(const void* kernel);

}  // namespace host_cuda
