// Shared helpers of the GPU tests: a fixture that skips without a device, device
// buffers filled from / read back to host vectors, bf16 rounding on the host
// (round-to-nearest-even, like __float2bfloat16) and the error metric.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/kernels/cpu/convert.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device.h"
#include "runtime/ops.h"

namespace gpu_test {

// Fixture base: every test skips when this process sees no CUDA device.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (runtime::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    TRAINER_CUDA_CHECK(cudaSetDevice(0));
  }
};

// Fixture base of tests through runtime/ops: a CudaContext registered as the device backend
// for the test's duration.
class GpuBackendTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    context_ = std::make_unique<runtime::cuda::CudaContext>();
    runtime::cuda::register_cuda_backend(*context_);
  }
  void TearDown() override { context_.reset(); }

  std::unique_ptr<runtime::cuda::CudaContext> context_;
};

// The values of an f32 tensor, host or device, copied into a host vector.
inline std::vector<float> host_values(const runtime::Tensor& tensor) {
  EXPECT_EQ(tensor.dtype(), runtime::DType::f32);
  runtime::CpuAllocator staging;
  const runtime::Tensor host = runtime::Tensor::empty(staging, tensor.shape(), runtime::DType::f32,
                                                      runtime::MemoryCategory::comm);
  runtime::ops::download(host, tensor);
  return std::vector<float>(host.f32(), host.f32() + host.numel());
}

// ---- bf16 on the host (bit pattern in a uint16_t) ----
inline uint16_t float_to_bf16_bits(float value) { return runtime::cpu::float_to_bf16(value); }
inline float bf16_bits_to_float(uint16_t bits) { return runtime::cpu::bf16_to_float(bits); }
inline float round_to_bf16(float value) {
  return bf16_bits_to_float(float_to_bf16_bits(value));
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = float_to_bf16_bits(values[i]);
  return out;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_bits_to_float(bits[i]);
  return out;
}
// Rounds every value to the nearest bf16 (what the device will see), in place.
inline void round_to_bf16_inplace(std::vector<float>& values) {
  for (float& value : values) value = round_to_bf16(value);
}

// ---- device buffers ----
// Owns a cudaMalloc'd buffer of `count` elements of T; copy deleted.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) TRAINER_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }

  // Synchronous copies (the device is idle afterwards).
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), count_);
    TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
    if (count_ > 0)
      TRAINER_CUDA_CHECK(
          cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
    if (count_ > 0)
      TRAINER_CUDA_CHECK(
          cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// bf16 device buffer from floats (each rounded to nearest even), and back to floats.
inline DeviceBuffer<uint16_t> upload_bf16(const std::vector<float>& values) {
  return DeviceBuffer<uint16_t>(to_bf16(values));
}
inline std::vector<float> download_bf16(const DeviceBuffer<uint16_t>& buffer) {
  return from_bf16(buffer.download());
}

// ---- inputs and the error metric ----
// n values uniform in [-scale, scale), reproducible from `seed`.
inline std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(n);
  for (float& value : values) value = uniform(generator);
  return values;
}

inline float max_abs(const std::vector<float>& values) {
  float result = 0.0f;
  for (float value : values) result = std::max(result, std::fabs(value));
  return result;
}

// max |actual - expected| / max(max |expected|, 1e-30); a NaN anywhere gives +inf.
inline double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  if (actual.size() != expected.size()) return INFINITY;
  double max_diff = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (std::isnan(diff)) return INFINITY;
    max_diff = std::max(max_diff, diff);
  }
  return max_diff / std::max(static_cast<double>(max_abs(expected)), 1e-30);
}

// EXPECT that `actual` matches `expected` to `tolerance` relative to max |expected|.
#define EXPECT_CLOSE(actual, expected, tolerance)                          \
  EXPECT_LE(::gpu_test::relative_error((actual), (expected)), (tolerance)) \
      << "relative error (max |diff| / max |expected|) above " << (tolerance)

}  // namespace gpu_test
