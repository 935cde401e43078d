// SHA-256 as FIPS 180-4 defines it: 64-byte blocks, the message padded with 0x80, zeros and its
// bit length (big endian), 64 rounds per block. Rules: no state outside the call.
#include "trainer/tokenizer/sha256.h"

#include <array>
#include <cstdint>

namespace trainer::tokenizer {
namespace {

constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotate_right(uint32_t value, int bits) {
  return (value >> bits) | (value << (32 - bits));
}

void compress_block(const unsigned char* block, std::array<uint32_t, 8>& state) {
  std::array<uint32_t, 64> schedule;
  for (int i = 0; i < 16; ++i) {
    schedule[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
                  (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotate_right(schedule[i - 15], 7) ^ rotate_right(schedule[i - 15], 18) ^
                        (schedule[i - 15] >> 3);
    const uint32_t s1 = rotate_right(schedule[i - 2], 17) ^ rotate_right(schedule[i - 2], 19) ^
                        (schedule[i - 2] >> 10);
    schedule[i] = schedule[i - 16] + s0 + schedule[i - 7] + s1;
  }
  auto [a, b, c, d, e, f, g, h] = state;
  for (int i = 0; i < 64; ++i) {
    const uint32_t sum1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
    const uint32_t choice = (e & f) ^ (~e & g);
    const uint32_t temp1 = h + sum1 + choice + kRoundConstants[i] + schedule[i];
    const uint32_t sum0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    h = g, g = f, f = e, e = d + temp1, d = c, c = b, b = a, a = temp1 + sum0 + majority;
  }
  const std::array<uint32_t, 8> added = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state[i] += added[i];
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::array<uint32_t, 8> state = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t full_blocks = bytes.size() / 64;
  for (size_t i = 0; i < full_blocks; ++i) compress_block(data + 64 * i, state);
  // The tail, 0x80, zeros and the bit length fill one or two more blocks.
  std::array<unsigned char, 128> tail{};
  const size_t tail_bytes = bytes.size() - 64 * full_blocks;
  for (size_t i = 0; i < tail_bytes; ++i) tail[i] = data[64 * full_blocks + i];
  tail[tail_bytes] = 0x80;
  const size_t tail_blocks = tail_bytes + 9 <= 64 ? 1 : 2;
  const uint64_t bit_length = uint64_t{bytes.size()} * 8;
  for (int i = 0; i < 8; ++i) {
    tail[64 * tail_blocks - 1 - i] = static_cast<unsigned char>(bit_length >> (8 * i));
  }
  for (size_t i = 0; i < tail_blocks; ++i) compress_block(tail.data() + 64 * i, state);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const uint32_t word : state) {
    for (int shift = 28; shift >= 0; shift -= 4) hex += kHex[(word >> shift) & 15];
  }
  return hex;
}

}  // namespace trainer::tokenizer
