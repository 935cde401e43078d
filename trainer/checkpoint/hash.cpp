// XXH64, the 64-bit xxHash of Yann Collet, written from its specification (doc/xxhash_spec.md):
// four 64-bit lanes over 32-byte stripes, then the tail and an avalanche. Checksums of checkpoint
// files; streaming so the writer hashes bytes as they go to disk.
#include <bit>
#include <cstring>

#include "trainer/checkpoint/format.h"

namespace trainer::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little,
              "XXH64 reads little-endian lanes; a big-endian host would need byte swaps");

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;
constexpr size_t kStripeBytes = 32;

inline uint64_t load64(const unsigned char* bytes) {
  uint64_t value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

inline uint32_t load32(const unsigned char* bytes) {
  uint32_t value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

inline uint64_t lane_round(uint64_t accumulator, uint64_t lane) {
  accumulator += lane * kPrime2;
  accumulator = std::rotl(accumulator, 31);
  return accumulator * kPrime1;
}

inline uint64_t merge_accumulator(uint64_t hash, uint64_t accumulator) {
  hash ^= lane_round(0, accumulator);
  return hash * kPrime1 + kPrime4;
}

inline void consume_stripe(uint64_t (&accumulators)[4], const unsigned char* stripe) {
  accumulators[0] = lane_round(accumulators[0], load64(stripe));
  accumulators[1] = lane_round(accumulators[1], load64(stripe + 8));
  accumulators[2] = lane_round(accumulators[2], load64(stripe + 16));
  accumulators[3] = lane_round(accumulators[3], load64(stripe + 24));
}

}  // namespace

Xxh64::Xxh64(uint64_t seed)
    : accumulators_{seed + kPrime1 + kPrime2, seed + kPrime2, seed, seed - kPrime1}, seed_(seed) {}

void Xxh64::update(const void* bytes, size_t size) {
  const auto* next = static_cast<const unsigned char*>(bytes);
  total_bytes_ += size;
  if (buffered_bytes_ + size < kStripeBytes) {
    if (size > 0) std::memcpy(buffer_ + buffered_bytes_, next, size);
    buffered_bytes_ += size;
    return;
  }
  if (buffered_bytes_ > 0) {
    const size_t fill = kStripeBytes - buffered_bytes_;
    std::memcpy(buffer_ + buffered_bytes_, next, fill);
    consume_stripe(accumulators_, buffer_);
    next += fill;
    size -= fill;
    buffered_bytes_ = 0;
  }
  for (; size >= kStripeBytes; next += kStripeBytes, size -= kStripeBytes)
    consume_stripe(accumulators_, next);
  if (size > 0) std::memcpy(buffer_, next, size);
  buffered_bytes_ = size;
}

uint64_t Xxh64::digest() const {
  uint64_t hash;
  if (total_bytes_ >= kStripeBytes) {
    hash = std::rotl(accumulators_[0], 1) + std::rotl(accumulators_[1], 7) +
           std::rotl(accumulators_[2], 12) + std::rotl(accumulators_[3], 18);
    for (const uint64_t accumulator : accumulators_) hash = merge_accumulator(hash, accumulator);
  } else {
    hash = seed_ + kPrime5;
  }
  hash += total_bytes_;

  const unsigned char* tail = buffer_;
  size_t remaining = buffered_bytes_;
  for (; remaining >= 8; tail += 8, remaining -= 8) {
    hash ^= lane_round(0, load64(tail));
    hash = std::rotl(hash, 27) * kPrime1 + kPrime4;
  }
  if (remaining >= 4) {
    hash ^= static_cast<uint64_t>(load32(tail)) * kPrime1;
    hash = std::rotl(hash, 23) * kPrime2 + kPrime3;
    tail += 4;
    remaining -= 4;
  }
  for (; remaining > 0; ++tail, --remaining) {
    hash ^= *tail * kPrime5;
    hash = std::rotl(hash, 11) * kPrime1;
  }

  hash ^= hash >> 33;
  hash *= kPrime2;
  hash ^= hash >> 29;
  hash *= kPrime3;
  hash ^= hash >> 32;
  return hash;
}

uint64_t xxh64(const void* bytes, size_t size, uint64_t seed) {
  Xxh64 state(seed);
  state.update(bytes, size);
  return state.digest();
}

std::string hex64(uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) text[static_cast<size_t>(i)] = kDigits[value & 0xF];
  return text;
}

}  // namespace trainer::checkpoint
