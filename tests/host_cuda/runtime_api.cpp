// Host CUDA's runtime API: the cuda* functions the backend calls, on host memory. One device
// (an H200's limits); allocations are guarded host blocks, checked on free; every call
// runs at once, after the work its stream still has pending (stream_work.h). Note [Host CUDA].
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "tests/host_cuda/host_cuda_state.h"
#include "tests/host_cuda/stream_work.h"

namespace host_cuda {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr size_t kGlobalBytes = size_t{140} << 30;
constexpr int kMultiprocessors = 132;

// A device allocation: its bytes end where an inaccessible page begins, so a kernel (or a
// copy) that runs past the end faults at once instead of corrupting a neighbour; another page
// precedes the first page of the bytes. The bytes start 256-aligned (cudaMalloc's guarantee):
// the slack up to the next 256 bytes, which a device would not catch either, is accessible.
struct Block {
  char* base = nullptr;
  size_t mapped = 0;
};

struct State {
  std::mutex mutex;
  std::map<const void*, Block> allocations;  // device and pinned host blocks
  std::unordered_map<const void*, size_t> opt_in;
  cudaError_t last_error = cudaSuccess;
  int device = 0;
};

State& state() {
  static State s;
  return s;
}

cudaError_t allocate(void** out, size_t bytes) {
  if (out == nullptr) return cudaErrorInvalidValue;
  if (bytes > kGlobalBytes) return cudaErrorMemoryAllocation;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  const size_t body = (rounded + page - 1) / page * page;
  const size_t mapped = body + 2 * page;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return cudaErrorMemoryAllocation;
  char* bytes_base = static_cast<char*>(base);
  mprotect(bytes_base, page, PROT_NONE);
  mprotect(bytes_base + page + body, page, PROT_NONE);
  char* p = bytes_base + page + body - rounded;
  std::memset(p, 0xCD, rounded);  // uninitialised memory shows
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[p] = Block{bytes_base, mapped};
  *out = p;
  return cudaSuccess;
}

cudaError_t release(void* p) {
  if (p == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(p);
  if (it == state().allocations.end()) return cudaErrorInvalidValue;
  munmap(it->second.base, it->second.mapped);
  state().allocations.erase(it);
  return cudaSuccess;
}

cudaError_t copy(void* dst, const void* src, size_t count) {
  if (count > 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  if (count > 0) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t fill(void* p, int value, size_t count) {
  if (count > 0 && p == nullptr) return cudaErrorInvalidValue;
  if (count > 0) std::memset(p, value, count);
  return cudaSuccess;
}

}  // namespace

void record_launch_error(cudaError_t error) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().last_error == cudaSuccess) state().last_error = error;
}

size_t opted_in_shared_bytes(const void* kernel) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().opt_in.find(kernel);
  return it == state().opt_in.end() ? 0 : it->second;
}

}  // namespace host_cuda

using host_cuda::state;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  state().device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = state().device;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  host_cuda::settle_all();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "host CUDA (H200 limits)", sizeof(prop->name) - 1);
  prop->totalGlobalMem = host_cuda::kGlobalBytes;
  prop->sharedMemPerBlock = host_cuda::kDefaultSharedBytes;
  prop->sharedMemPerBlockOptin = host_cuda::kSharedOptInBytes;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = static_cast<int>(host_cuda::kMaxBlockThreads);
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = static_cast<int>(host_cuda::kMaxBlockThreads);
  prop->maxThreadsDim[2] = static_cast<int>(host_cuda::kMaxBlockZ);
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = static_cast<int>(host_cuda::kMaxGridYZ);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = host_cuda::kMultiprocessors;
  // Each process is a GPU of its own (so the trainer's ranks may use NCCL, host NCCL here).
  const uint64_t pid = static_cast<uint64_t>(getpid());
  std::memcpy(prop->uuid.bytes, &pid, sizeof(pid));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(host_cuda::kSharedOptInBytes);
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = host_cuda::kMultiprocessors;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;  // an attribute the backend does not ask for yet
  }
}

cudaError_t cudaGetLastError(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const cudaError_t error = state().last_error;
  state().last_error = cudaSuccess;
  return error;
}
cudaError_t cudaPeekAtLastError(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t error) {
  return cudaGetErrorName(error);
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  return host_cuda::allocate(p, bytes);
}
cudaError_t cudaFree(void* p) {
  host_cuda::settle_all();  // cudaFree waits for the device
  return host_cuda::release(p);
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  return host_cuda::allocate(p, bytes);
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  host_cuda::settle(stream);
  return host_cuda::release(p);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  return host_cuda::allocate(p, bytes);
}
cudaError_t cudaFreeHost(void* p) {
  return host_cuda::release(p);
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = host_cuda::kGlobalBytes;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind) {
  host_cuda::settle(nullptr);
  return host_cuda::copy(dst, src, count);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind,
                            cudaStream_t stream) {
  host_cuda::settle(stream);
  return host_cuda::copy(dst, src, count);
}
cudaError_t cudaMemset(void* p, int value, size_t count) {
  host_cuda::settle(nullptr);
  return host_cuda::fill(p, value, count);
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  host_cuda::settle(stream);
  return host_cuda::fill(p, value, count);
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  if (value < 0 || static_cast<size_t>(value) > host_cuda::kSharedOptInBytes)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().opt_in[func] = static_cast<size_t>(value);
  return cudaSuccess;
}

}  // extern "C"
