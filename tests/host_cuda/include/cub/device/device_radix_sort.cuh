// Host CUDA's stand-in for CUB's DeviceRadixSort::SortPairs (the one CUB call of the backend):
// a stable sort of the pairs by the key bits [begin_bit, end_bit), what CUB's LSD radix sort
// computes, with the same two-phase temp-storage protocol. Note [Host CUDA].
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class Key, class Value, class Count>
  static cudaError_t SortPairs(void* temp_storage, size_t& temp_storage_bytes, const Key* keys_in,
                               Key* keys_out, const Value* values_in, Value* values_out,
                               Count count, int begin_bit = 0,
                               int end_bit = static_cast<int>(sizeof(Key) * 8),
                               cudaStream_t /*stream*/ = nullptr) {
    if (temp_storage == nullptr) {
      temp_storage_bytes = 1;  // CUB asks for scratch even for tiny inputs
      return cudaSuccess;
    }
    if (begin_bit < 0 || end_bit > static_cast<int>(sizeof(Key) * 8) || begin_bit >= end_bit)
      return cudaErrorInvalidValue;
    const size_t n = static_cast<size_t>(count);
    const uint64_t width = static_cast<uint64_t>(end_bit - begin_bit);
    const uint64_t mask = width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    auto digits = [&](size_t i) { return (static_cast<uint64_t>(keys_in[i]) >> begin_bit) & mask; };
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return digits(a) < digits(b); });
    std::vector<Key> keys(n);
    std::vector<Value> values(n);
    for (size_t i = 0; i < n; ++i) keys[i] = keys_in[order[i]], values[i] = values_in[order[i]];
    std::copy(keys.begin(), keys.end(), keys_out);
    std::copy(values.begin(), values.end(), values_out);
    return cudaSuccess;
  }
};

}  // namespace cub
