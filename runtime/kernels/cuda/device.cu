// Device discovery and selection.
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device.h"

#include <cstring>

namespace runtime::cuda {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a machine without a driver
    return 0;
  }
  return count;
}

void select_device_for_local_rank(int local_rank) {
  const int count = device_count();
  if (count == 0) throw LibraryError("no CUDA device is visible to this process");
  TRAINER_CUDA_CHECK(cudaSetDevice(local_rank % count));
}

std::array<unsigned char, 16> current_device_uuid() {
  int device = 0;
  TRAINER_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TRAINER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  std::array<unsigned char, 16> uuid{};
  std::memcpy(uuid.data(), properties.uuid.bytes, uuid.size());
  return uuid;
}

std::string current_device_name() {
  int device = 0;
  TRAINER_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TRAINER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

}  // namespace runtime::cuda
