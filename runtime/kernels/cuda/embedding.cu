// Token and position embeddings. Token backward is deterministic without atomics: a stable
// radix sort (CUB) groups the rows of each shard-local id in row order; the first block of
// each group adds the group's dout rows into dwte in that order, one thread per channel.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <limits>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/embedding.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

constexpr size_t kScratchAlignBytes = 256;

size_t align_up(size_t bytes) {
  return (bytes + kScratchAlignBytes - 1) / kScratchAlignBytes * kScratchAlignBytes;
}

// Sort keys are shard-local ids; ids outside the shard get key vocab_rows (sorted last, skipped).
int sort_end_bit(int64_t vocab_rows) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) <= vocab_rows) ++bits;
  return bits;
}

// Index: Note [Index width] (the table rows are addressed in 64 bits: vocab_rows * C may not fit).
template <class T, class Index>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, Index rows,
                                         Index C, int64_t vocab_start, int64_t vocab_rows) {
  const Index n = rows * C;
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>()) {
    const Index r = i / C, c = i % C;
    const int64_t local = static_cast<int64_t>(tokens[r]) - vocab_start;
    out[i] = local >= 0 && local < vocab_rows ? wte[local * C + c] : from_float<T>(0.f);
  }
}

__global__ void sort_input_kernel(uint32_t* keys, int32_t* row_ids, const int32_t* tokens,
                                  int64_t rows, int64_t vocab_start, int64_t vocab_rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    const int64_t local = static_cast<int64_t>(tokens[r]) - vocab_start;
    keys[r] = static_cast<uint32_t>(local >= 0 && local < vocab_rows ? local : vocab_rows);
    row_ids[r] = static_cast<int32_t>(r);
  }
}

// Grid: (sorted positions, channel blocks). The block at the first position of a group of equal
// keys adds dout[row] for the group's rows, in increasing row order, into dwte[key].
template <class T>
__global__ void __launch_bounds__(kThreads)
    embedding_backward_kernel(float* dwte, const T* dout, const uint32_t* sorted_keys,
                              const int32_t* sorted_rows, int64_t rows, int64_t C,
                              int64_t vocab_rows) {
  const int64_t first = blockIdx.x;
  const uint32_t key = sorted_keys[first];
  if (static_cast<int64_t>(key) >= vocab_rows) return;     // outside the shard
  if (first > 0 && sorted_keys[first - 1] == key) return;  // not the group's first position
  const int64_t c = blockIdx.y * int64_t{kThreads} + threadIdx.x;
  if (c >= C) return;
  float* dst = dwte + static_cast<int64_t>(key) * C + c;
  float acc = *dst;
  for (int64_t j = first; j < rows && sorted_keys[j] == key; ++j)
    acc += to_float(dout[static_cast<int64_t>(sorted_rows[j]) * C + c]);
  *dst = acc;
}

// Index: Note [Index width] over the (T_len, B, C) output; the table row in 64 bits.
// document_starts (T_len, B) or null (Note [Document positions] in runtime/op_args.h).
template <class T, class Index>
__global__ void position_forward_kernel(T* out, const T* wpe, Index T_len, Index B, Index C,
                                        int64_t t_offset, const int32_t* document_starts) {
  const Index n = T_len * B * C, row = B * C;
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>()) {
    const Index t = i / row, c = i % C;
    const int64_t start = document_starts == nullptr ? 0 : document_starts[i / C];
    out[i] = from_float<T>(to_float(out[i]) + to_float(wpe[(t_offset + t - start) * C + c]));
  }
}

// One thread per (t, c): dwpe[t_offset + t][c] += dout(t, 0, c) + ... in order b = 0..B-1.
// Index: Note [Index width] over dout's T_len * B * C elements.
template <class T, class Index>
__global__ void position_backward_kernel(float* dwpe, const T* dout, Index T_len, Index B, Index C,
                                         int64_t t_offset) {
  const Index n = T_len * C;
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>()) {
    const Index t = i / C, c = i % C;
    float* dst = dwpe + (t_offset + t) * C + c;
    float acc = *dst;
    for (Index b = 0; b < B; ++b) acc += to_float(dout[(t * B + b) * C + c]);
    *dst = acc;
  }
}

// The first of rows [lo, T_len) of sample b whose document starts after `start`, or T_len
// (starts never decrease along a sample's rows).
__device__ int64_t next_document_row(const int32_t* starts, int64_t B, int64_t b, int64_t lo,
                                     int64_t T_len, int64_t start) {
  int64_t hi = T_len;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (starts[mid * B + b] > start) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// With document starts (Note [Document positions]), one thread per (position p, c) of the
// t_offset + T_len positions the rows can take: sample by sample, document by document (row
// order), the one row of each document at position p, if any, adds into dwpe[p][c]. A row at
// position p of the document starting at `start` is row start + p - t_offset; the next
// document's start is found by a binary search. Index: over the larger of the thread count and
// dout's T_len * B * C elements.
template <class T, class Index>
__global__ void position_backward_documents_kernel(float* dwpe, const T* dout,
                                                   const int32_t* starts, Index T_len, Index B,
                                                   Index C, int64_t t_offset) {
  const Index n = (static_cast<Index>(t_offset) + T_len) * C;
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>()) {
    const int64_t p = i / C, c = i % C;
    float acc = dwpe[i];
    bool touched = false;
    for (int64_t b = 0; b < B; ++b) {
      int64_t start = starts[b];  // the document of the call's first row
      while (true) {
        const int64_t t = start + p - t_offset;
        if (t >= T_len) break;  // later documents start later still
        if (t >= 0 && starts[t * B + b] == start) {
          acc += to_float(dout[(t * B + b) * C + c]);
          touched = true;
        }
        const int64_t u =
            next_document_row(starts, B, b, std::max<int64_t>(start - t_offset, 0), T_len, start);
        if (u >= T_len) break;
        start = starts[u * B + b];
      }
    }
    if (touched) dwpe[i] = acc;
  }
}

// Scratch layout: keys in/out (u32), row ids in/out (i32), CUB temporary storage.
struct SortScratch {
  uint32_t* keys_in;
  uint32_t* keys_out;
  int32_t* rows_in;
  int32_t* rows_out;
  void* temp;
  size_t temp_bytes;
};

size_t cub_temp_bytes(int64_t rows, int end_bit) {
  size_t temp_bytes = 0;
  TRAINER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(rows),
      0, end_bit));
  return temp_bytes;
}

SortScratch carve_scratch(void* base, int64_t rows, size_t temp_bytes) {
  char* p = static_cast<char*>(base);
  const size_t ids_bytes = align_up(static_cast<size_t>(rows) * sizeof(uint32_t));
  SortScratch s{};
  s.keys_in = reinterpret_cast<uint32_t*>(p);
  s.keys_out = reinterpret_cast<uint32_t*>(p + ids_bytes);
  s.rows_in = reinterpret_cast<int32_t*>(p + 2 * ids_bytes);
  s.rows_out = reinterpret_cast<int32_t*>(p + 3 * ids_bytes);
  s.temp = p + 4 * ids_bytes;
  s.temp_bytes = temp_bytes;
  return s;
}

void check_shape(int64_t rows, int64_t C, int64_t vocab_rows) {
  TRAINER_ASSERT(rows >= 0 && C >= 0 && vocab_rows >= 0, "embedding of " << rows << " rows x " << C
                                                                         << " channels, "
                                                                         << vocab_rows << " ids");
}

void check_position_shape(int64_t T_len, int64_t B, int64_t C, int64_t t_offset) {
  TRAINER_ASSERT(T_len >= 0 && B >= 0 && C >= 0 && t_offset >= 0, "position embedding of ("
                                                                      << T_len << ", " << B << ", "
                                                                      << C << ") at " << t_offset);
}

template <class T>
void launch_forward(T* out, const int32_t* tokens, const T* wte, int64_t rows, int64_t C,
                    int64_t vocab_start, int64_t vocab_rows, cudaStream_t stream) {
  check_shape(rows, C, vocab_rows);
  if (rows * C == 0) return;
  with_index_type(rows * C, [&](auto index) {
    using Index = decltype(index);
    embedding_forward_kernel<T, Index><<<grid_for(rows * C), kThreads, 0, stream>>>(
        out, tokens, wte, static_cast<Index>(rows), static_cast<Index>(C), vocab_start, vocab_rows);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_backward(float* dwte, const T* dout, const int32_t* tokens, int64_t rows, int64_t C,
                     int64_t vocab_start, int64_t vocab_rows, void* scratch, cudaStream_t stream) {
  check_shape(rows, C, vocab_rows);
  TRAINER_ASSERT(rows <= kMaxBlocks && vocab_rows < std::numeric_limits<uint32_t>::max() &&
                     (C + kThreads - 1) / kThreads <= 65535,
                 "embedding backward of " << rows << " rows, " << C << " channels, " << vocab_rows
                                          << " ids is too large");
  if (rows == 0 || C == 0 || vocab_rows == 0) return;
  const int end_bit = sort_end_bit(vocab_rows);
  const StreamScratch owned(
      scratch == nullptr ? embedding_backward_scratch_bytes(rows, vocab_rows) : 0, stream);
  void* base = scratch != nullptr ? scratch : owned.get();
  SortScratch s = carve_scratch(base, rows, cub_temp_bytes(rows, end_bit));
  sort_input_kernel<<<grid_for(rows), kThreads, 0, stream>>>(s.keys_in, s.rows_in, tokens, rows,
                                                             vocab_start, vocab_rows);
  TRAINER_CUDA_CHECK(cudaGetLastError());
  TRAINER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp, s.temp_bytes, s.keys_in, s.keys_out,
                                                     s.rows_in, s.rows_out, static_cast<int>(rows),
                                                     0, end_bit, stream));
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((C + kThreads - 1) / kThreads));
  embedding_backward_kernel<T>
      <<<grid, kThreads, 0, stream>>>(dwte, dout, s.keys_out, s.rows_out, rows, C, vocab_rows);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_position_forward(T* out, const T* wpe, int64_t T_len, int64_t B, int64_t C,
                             int64_t t_offset, const int32_t* document_starts,
                             cudaStream_t stream) {
  check_position_shape(T_len, B, C, t_offset);
  if (T_len * B * C == 0) return;
  with_index_type(T_len * B * C, [&](auto index) {
    using Index = decltype(index);
    position_forward_kernel<T, Index><<<grid_for(T_len * B * C), kThreads, 0, stream>>>(
        out, wpe, static_cast<Index>(T_len), static_cast<Index>(B), static_cast<Index>(C), t_offset,
        document_starts);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_position_backward(float* dwpe, const T* dout, int64_t T_len, int64_t B, int64_t C,
                              int64_t t_offset, const int32_t* document_starts,
                              cudaStream_t stream) {
  check_position_shape(T_len, B, C, t_offset);
  if (T_len * B * C == 0) return;
  if (document_starts != nullptr) {
    const int64_t threads = (t_offset + T_len) * C;
    with_index_type(std::max(threads, T_len * B * C), [&](auto index) {
      using Index = decltype(index);
      position_backward_documents_kernel<T, Index><<<grid_for(threads), kThreads, 0, stream>>>(
          dwpe, dout, document_starts, static_cast<Index>(T_len), static_cast<Index>(B),
          static_cast<Index>(C), t_offset);
    });
    TRAINER_CUDA_CHECK(cudaGetLastError());
    return;
  }
  with_index_type(T_len * B * C, [&](auto index) {
    using Index = decltype(index);
    position_backward_kernel<T, Index><<<grid_for(T_len * C), kThreads, 0, stream>>>(
        dwpe, dout, static_cast<Index>(T_len), static_cast<Index>(B), static_cast<Index>(C),
        t_offset);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t embedding_backward_scratch_bytes(int64_t rows, int64_t vocab_rows) {
  if (rows <= 0 || vocab_rows <= 0) return 0;
  const size_t ids_bytes = align_up(static_cast<size_t>(rows) * sizeof(uint32_t));
  return 4 * ids_bytes + align_up(cub_temp_bytes(rows, sort_end_bit(vocab_rows)));
}

void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t rows, int64_t C,
                       int64_t vocab_start, int64_t vocab_rows, cudaStream_t stream) {
  launch_forward(out, tokens, wte, rows, C, vocab_start, vocab_rows, stream);
}
void embedding_forward(__nv_bfloat16* out, const int32_t* tokens, const __nv_bfloat16* wte,
                       int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows,
                       cudaStream_t stream) {
  launch_forward(out, tokens, wte, rows, C, vocab_start, vocab_rows, stream);
}

void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows, void* scratch,
                        cudaStream_t stream) {
  launch_backward(dwte, dout, tokens, rows, C, vocab_start, vocab_rows, scratch, stream);
}
void embedding_backward(float* dwte, const __nv_bfloat16* dout, const int32_t* tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows, void* scratch,
                        cudaStream_t stream) {
  launch_backward(dwte, dout, tokens, rows, C, vocab_start, vocab_rows, scratch, stream);
}

void position_embedding_forward(float* out, const float* wpe, int64_t T, int64_t B, int64_t C,
                                int64_t t_offset, const int32_t* document_starts,
                                cudaStream_t stream) {
  launch_position_forward(out, wpe, T, B, C, t_offset, document_starts, stream);
}
void position_embedding_forward(__nv_bfloat16* out, const __nv_bfloat16* wpe, int64_t T, int64_t B,
                                int64_t C, int64_t t_offset, const int32_t* document_starts,
                                cudaStream_t stream) {
  launch_position_forward(out, wpe, T, B, C, t_offset, document_starts, stream);
}

void position_embedding_backward(float* dwpe, const float* dout, int64_t T, int64_t B, int64_t C,
                                 int64_t t_offset, const int32_t* document_starts,
                                 cudaStream_t stream) {
  launch_position_backward(dwpe, dout, T, B, C, t_offset, document_starts, stream);
}
void position_embedding_backward(float* dwpe, const __nv_bfloat16* dout, int64_t T, int64_t B,
                                 int64_t C, int64_t t_offset, const int32_t* document_starts,
                                 cudaStream_t stream) {
  launch_position_backward(dwpe, dout, T, B, C, t_offset, document_starts, stream);
}

}  // namespace runtime::cuda
