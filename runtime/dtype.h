// Element types of tensors and their sizes. The CPU backend computes in f32;
// bf16 is the GPU activation/weight type; u8 holds dropout masks, i32 token ids.
#pragma once

#include <cstdint>
#include <string_view>

namespace runtime {

enum class DType : uint8_t { f32, bf16, i32, u8 };

constexpr int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

// meta: shapes and sizes only (runtime/meta_device.h), for predicting memory without running.
enum class DeviceKind : uint8_t { cpu, cuda, meta };

}  // namespace runtime
