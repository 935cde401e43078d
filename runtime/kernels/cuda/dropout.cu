// Dropout with Philox masks addressed by global coordinates (Note [Dropout RNG]): each
// thread draws one Philox block (four consecutive element indices) of one row and writes
// the lanes inside the row, so masks equal the CPU's bit for bit. Kept = inp * scale, else +0.
#include <algorithm>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/dropout.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

struct DropoutRule {
  DropoutKey key;
  uint32_t threshold;  // keep iff bits >= threshold
  float scale;         // 1 / (1 - p), computed once in float as on the CPU
};

DropoutRule make_rule(float p, DropoutKey key) {
  TRAINER_ASSERT(p >= 0.f && p < 1.f, "dropout probability " << p << " outside [0, 1)");
  return DropoutRule{key, dropout_threshold(p), 1.0f / (1.0f - p)};
}

// How a row of the local tensor maps to global element indices and samples.
// Hidden (T, B, C): row = t * B + b, row_len = C, first element (offset + t) * C.
// Attention (B, H, T, T): row = (b * H + h) * T + i, row_len = T,
// first element ((offset + h) * T + i) * T.
struct RowLayout {
  bool attention;
  int64_t rows;
  int64_t row_len;
  int64_t batch;   // hidden: B
  int64_t heads;   // attention: H
  int64_t offset;  // hidden: t_offset; attention: head_offset
  int64_t sample_offset;
};

// Index: Note [Index width]; local indices (row, k, element in the tensor) take it, the global
// element indices of the Philox counters stay 64-bit.
template <class Index>
__device__ __forceinline__ void row_origin(const RowLayout& layout, Index row,
                                           uint64_t* first_element, uint64_t* sample) {
  if (layout.attention) {
    const auto T = static_cast<Index>(layout.row_len), heads = static_cast<Index>(layout.heads);
    const Index i = row % T, head_row = row / T, h = head_row % heads, b = head_row / heads;
    *first_element = (static_cast<uint64_t>(layout.offset + h) * static_cast<uint64_t>(T) + i) *
                     static_cast<uint64_t>(T);
    *sample = static_cast<uint64_t>(layout.sample_offset + b);
  } else {
    const auto batch = static_cast<Index>(layout.batch);
    const Index t = row / batch, b = row % batch;
    *first_element =
        static_cast<uint64_t>(layout.offset + t) * static_cast<uint64_t>(layout.row_len);
    *sample = static_cast<uint64_t>(layout.sample_offset + b);
  }
}

// Work item = (row, k): Philox block (first_element >> 2) + k of that row; a row of length
// L spans at most (L + 3) / 4 + 1 blocks.
template <class T, class Index>
__global__ void dropout_forward_kernel(T* out, uint8_t* mask, const T* inp, RowLayout layout,
                                       Index blocks_per_row, DropoutRule rule) {
  const Index items = static_cast<Index>(layout.rows) * blocks_per_row;
  const auto row_len = static_cast<Index>(layout.row_len);
  for (Index item = grid_start<Index>(); item < items; item += grid_step<Index>()) {
    const Index row = item / blocks_per_row, k = item % blocks_per_row;
    uint64_t first_element = 0, sample = 0;
    row_origin(layout, row, &first_element, &sample);
    const uint64_t end_element = first_element + row_len;
    const uint64_t block = (first_element >> 2) + k;
    if (block * 4 >= end_element) continue;  // past the row's last block
    const Philox4x32 counter{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
    const Philox4x32 bits = philox4x32_10(counter, rule.key.key0, rule.key.key1);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const uint64_t element = block * 4 + lane;
      if (element < first_element || element >= end_element) continue;
      const Index i = row * row_len + static_cast<Index>(element - first_element);
      const bool keep = bits.v[lane] >= rule.threshold;
      mask[i] = keep ? 1 : 0;
      out[i] = keep ? from_float<T>(to_float(inp[i]) * rule.scale) : from_float<T>(0.f);
    }
  }
}

// out = mask ? inp * scale : 0 (apply and backward alike).
template <class T, class Index>
__global__ void dropout_mask_kernel(T* out, const T* inp, const uint8_t* mask, Index n,
                                    float scale) {
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>())
    out[i] = mask[i] ? from_float<T>(to_float(inp[i]) * scale) : from_float<T>(0.f);
}

template <class T>
void launch_forward(T* out, uint8_t* mask, const T* inp, const RowLayout& layout, float p,
                    DropoutKey key, cudaStream_t stream) {
  const DropoutRule rule = make_rule(p, key);
  TRAINER_ASSERT(layout.rows >= 0 && layout.row_len >= 0,
                 "dropout of " << layout.rows << " rows of " << layout.row_len);
  const int64_t n = layout.rows * layout.row_len;
  if (n == 0) return;
  if (p == 0.f) {  // every element kept, out an exact copy of inp
    TRAINER_CUDA_CHECK(cudaMemsetAsync(mask, 1, static_cast<size_t>(n), stream));
    if (out != inp)
      TRAINER_CUDA_CHECK(cudaMemcpyAsync(out, inp, static_cast<size_t>(n) * sizeof(T),
                                         cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const int64_t blocks_per_row = (layout.row_len + 3) / 4 + 1;
  const int64_t items = layout.rows * blocks_per_row;
  with_index_type(std::max(items, n), [&](auto index) {
    using Index = decltype(index);
    dropout_forward_kernel<T, Index><<<grid_for(items), kThreads, 0, stream>>>(
        out, mask, inp, layout, static_cast<Index>(blocks_per_row), rule);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_mask(T* out, const T* inp, const uint8_t* mask, int64_t n, float p,
                 cudaStream_t stream) {
  const float scale = make_rule(p, DropoutKey{}).scale;
  if (n <= 0) return;
  with_index_type(n, [&](auto index) {
    using Index = decltype(index);
    dropout_mask_kernel<T, Index>
        <<<grid_for(n), kThreads, 0, stream>>>(out, inp, mask, static_cast<Index>(n), scale);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

RowLayout hidden_layout(int64_t T, int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset) {
  return RowLayout{false, T * B, C, B, 1, t_offset, sample_offset};
}

RowLayout attention_layout(int64_t B, int64_t H, int64_t T, int64_t head_offset,
                           int64_t sample_offset) {
  return RowLayout{true, B * H * T, T, B, H, head_offset, sample_offset};
}

}  // namespace

void dropout_hidden_forward(float* out, uint8_t* mask, const float* inp, int64_t T, int64_t B,
                            int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key, cudaStream_t stream) {
  launch_forward(out, mask, inp, hidden_layout(T, B, C, t_offset, sample_offset), p, key, stream);
}
void dropout_hidden_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* inp, int64_t T,
                            int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key, cudaStream_t stream) {
  launch_forward(out, mask, inp, hidden_layout(T, B, C, t_offset, sample_offset), p, key, stream);
}

void dropout_attention_forward(float* out, uint8_t* mask, const float* inp, int64_t B, int64_t H,
                               int64_t T, int64_t head_offset, int64_t sample_offset, float p,
                               DropoutKey key, cudaStream_t stream) {
  launch_forward(out, mask, inp, attention_layout(B, H, T, head_offset, sample_offset), p, key,
                 stream);
}
void dropout_attention_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* inp,
                               int64_t B, int64_t H, int64_t T, int64_t head_offset,
                               int64_t sample_offset, float p, DropoutKey key,
                               cudaStream_t stream) {
  launch_forward(out, mask, inp, attention_layout(B, H, T, head_offset, sample_offset), p, key,
                 stream);
}

void dropout_apply(float* out, const float* inp, const uint8_t* mask, int64_t n, float p,
                   cudaStream_t stream) {
  launch_mask(out, inp, mask, n, p, stream);
}
void dropout_apply(__nv_bfloat16* out, const __nv_bfloat16* inp, const uint8_t* mask, int64_t n,
                   float p, cudaStream_t stream) {
  launch_mask(out, inp, mask, n, p, stream);
}

void dropout_backward(float* dinp, const float* dout, const uint8_t* mask, int64_t n, float p,
                      cudaStream_t stream) {
  launch_mask(dinp, dout, mask, n, p, stream);
}
void dropout_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const uint8_t* mask,
                      int64_t n, float p, cudaStream_t stream) {
  launch_mask(dinp, dout, mask, n, p, stream);
}

}  // namespace runtime::cuda
