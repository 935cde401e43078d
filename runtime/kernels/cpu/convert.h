// f32 <-> bf16 on the host. bf16 values are held as their bit pattern (uint16_t, the high half
// of the f32); f32 -> bf16 rounds to nearest even and keeps NaN a (quiet) NaN, as the device's
// __float2bfloat16_rn does, so a host conversion and a device one give the same bits.
#pragma once

#include <cstdint>
#include <cstring>

namespace runtime::cpu {

inline uint16_t float_to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

inline float bf16_to_float(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// out = inp converted (=).
void convert(uint16_t* out, const float* inp, int64_t n);
void convert(float* out, const uint16_t* inp, int64_t n);

}  // namespace runtime::cpu
