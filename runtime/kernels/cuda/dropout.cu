// Dropout with Philox masks addressed by global coordinates (Note [Dropout RNG]): each thread
// draws one Philox block (four consecutive element indices) and writes its lanes inside the row,
// so masks equal the CPU's bit for bit (one access per block when rows are multiples of 4).
#include <algorithm>
#include <initializer_list>
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

// The residual argument of plain dropout: none, typed like the data.
template <class T>
const T* no_residual(const T*) {
  return nullptr;
}

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
// residual: null for plain dropout, else out = residual + dropout(inp) in float, rounded once.
template <class T, class Index>
__global__ void dropout_forward_kernel(T* out, uint8_t* mask, const T* inp, const T* residual,
                                       RowLayout layout, Index blocks_per_row, DropoutRule rule) {
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
      const float dropped = keep ? to_float(inp[i]) * rule.scale : 0.f;
      out[i] = from_float<T>(residual != nullptr ? to_float(residual[i]) + dropped : dropped);
    }
  }
}

// The same for rows whose length is a multiple of 4 (so every Philox block lies inside one
// row) with the tensors aligned to 4 elements: work item = one block, its four lanes read and
// written as one access each (16 bytes of f32, 8 of bf16; Note [Vector access]).
template <class T, class Index>
__global__ void dropout_forward_packed_kernel(T* out, uint8_t* mask, const T* inp,
                                              const T* residual, RowLayout layout,
                                              DropoutRule rule) {
  const auto blocks_per_row = static_cast<Index>(layout.row_len / 4);
  const Index items = static_cast<Index>(layout.rows) * blocks_per_row;
  for (Index item = grid_start<Index>(); item < items; item += grid_step<Index>()) {
    const Index row = item / blocks_per_row, k = item % blocks_per_row;
    uint64_t first_element = 0, sample = 0;
    row_origin(layout, row, &first_element, &sample);
    const uint64_t block = (first_element >> 2) + k;
    const Philox4x32 counter{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
    const Philox4x32 bits = philox4x32_10(counter, rule.key.key0, rule.key.key1);
    const Index i = item * 4;
    float x[4], r[4] = {};
    load_pack<4>(inp + i, x);
    if (residual != nullptr) load_pack<4>(residual + i, r);
    Pack<uint8_t, 4> kept;
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const bool keep = bits.v[lane] >= rule.threshold;
      kept.v[lane] = keep ? 1 : 0;
      const float dropped = keep ? x[lane] * rule.scale : 0.f;
      x[lane] = residual != nullptr ? r[lane] + dropped : dropped;
    }
    *reinterpret_cast<Pack<uint8_t, 4>*>(mask + i) = kept;
    store_pack<4>(out + i, x);
  }
}

// out = mask ? inp * scale : 0 (apply and backward alike); kWidth: Note [Vector access].
template <class T, class Index, int kWidth>
__global__ void dropout_mask_kernel(T* out, const T* inp, const uint8_t* mask, Index packs,
                                    float scale) {
  float x[kWidth];
  for (Index p = grid_start<Index>(); p < packs; p += grid_step<Index>()) {
    const Index i = p * kWidth;
    load_pack<kWidth>(inp + i, x);
    const Pack<uint8_t, kWidth> kept = *reinterpret_cast<const Pack<uint8_t, kWidth>*>(mask + i);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) x[k] = kept.v[k] ? x[k] * scale : 0.f;
    store_pack<kWidth>(out + i, x);
  }
}

// Whether every pointer is aligned to `elements` elements of T (a null one is).
template <class T>
bool aligned_to(int64_t elements, std::initializer_list<const void*> pointers, bool bytes = false) {
  const auto alignment = static_cast<uintptr_t>(bytes ? elements : elements * sizeof(T));
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % alignment != 0) return false;
  return true;
}

template <class T>
void launch_forward(T* out, uint8_t* mask, const T* inp, const T* residual, const RowLayout& layout,
                    float p, DropoutKey key, cudaStream_t stream) {
  const DropoutRule rule = make_rule(p, key);
  TRAINER_ASSERT(layout.rows >= 0 && layout.row_len >= 0,
                 "dropout of " << layout.rows << " rows of " << layout.row_len);
  const int64_t n = layout.rows * layout.row_len;
  if (n == 0) return;
  TRAINER_ASSERT(residual == nullptr || p > 0.f,
                 "dropout with residual add needs p > 0 (a plain add otherwise), got " << p);
  if (p == 0.f) {  // every element kept, out an exact copy of inp
    TRAINER_CUDA_CHECK(cudaMemsetAsync(mask, 1, static_cast<size_t>(n), stream));
    if (out != inp)
      TRAINER_CUDA_CHECK(cudaMemcpyAsync(out, inp, static_cast<size_t>(n) * sizeof(T),
                                         cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (layout.row_len % 4 == 0 && aligned_to<T>(4, {out, inp, residual}) &&
      aligned_to<T>(4, {mask}, /*bytes=*/true)) {
    with_index_type(n, [&](auto index) {
      dropout_forward_packed_kernel<T, decltype(index)>
          <<<grid_for(n / 4), kThreads, 0, stream>>>(out, mask, inp, residual, layout, rule);
    });
    TRAINER_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int64_t blocks_per_row = (layout.row_len + 3) / 4 + 1;
  const int64_t items = layout.rows * blocks_per_row;
  with_index_type(std::max(items, n), [&](auto index) {
    using Index = decltype(index);
    dropout_forward_kernel<T, Index><<<grid_for(items), kThreads, 0, stream>>>(
        out, mask, inp, residual, layout, static_cast<Index>(blocks_per_row), rule);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_mask(T* out, const T* inp, const uint8_t* mask, int64_t n, float p,
                 cudaStream_t stream) {
  const float scale = make_rule(p, DropoutKey{}).scale;
  if (n <= 0) return;
  const bool packed = n % kPack<T> == 0 && aligned_to<T>(kPack<T>, {out, inp}) &&
                      aligned_to<T>(kPack<T>, {mask}, /*bytes=*/true);
  with_pack_width<T>(packed, [&](auto width) {
    constexpr int kWidth = decltype(width)::value;
    with_index_type(n, [&](auto index) {
      using Index = decltype(index);
      dropout_mask_kernel<T, Index, kWidth><<<grid_for(n / kWidth), kThreads, 0, stream>>>(
          out, inp, mask, static_cast<Index>(n / kWidth), scale);
    });
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
  launch_forward(out, mask, inp, no_residual(out), hidden_layout(T, B, C, t_offset, sample_offset),
                 p, key, stream);
}
void dropout_hidden_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* inp, int64_t T,
                            int64_t B, int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key, cudaStream_t stream) {
  launch_forward(out, mask, inp, no_residual(out), hidden_layout(T, B, C, t_offset, sample_offset),
                 p, key, stream);
}

void dropout_add_hidden_forward(float* out, uint8_t* mask, const float* residual, const float* inp,
                                int64_t T, int64_t B, int64_t C, int64_t t_offset,
                                int64_t sample_offset, float p, DropoutKey key,
                                cudaStream_t stream) {
  launch_forward(out, mask, inp, residual, hidden_layout(T, B, C, t_offset, sample_offset), p, key,
                 stream);
}
void dropout_add_hidden_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* residual,
                                const __nv_bfloat16* inp, int64_t T, int64_t B, int64_t C,
                                int64_t t_offset, int64_t sample_offset, float p, DropoutKey key,
                                cudaStream_t stream) {
  launch_forward(out, mask, inp, residual, hidden_layout(T, B, C, t_offset, sample_offset), p, key,
                 stream);
}

void dropout_attention_forward(float* out, uint8_t* mask, const float* inp, int64_t B, int64_t H,
                               int64_t T, int64_t head_offset, int64_t sample_offset, float p,
                               DropoutKey key, cudaStream_t stream) {
  launch_forward(out, mask, inp, no_residual(out),
                 attention_layout(B, H, T, head_offset, sample_offset), p, key, stream);
}
void dropout_attention_forward(__nv_bfloat16* out, uint8_t* mask, const __nv_bfloat16* inp,
                               int64_t B, int64_t H, int64_t T, int64_t head_offset,
                               int64_t sample_offset, float p, DropoutKey key,
                               cudaStream_t stream) {
  launch_forward(out, mask, inp, no_residual(out),
                 attention_layout(B, H, T, head_offset, sample_offset), p, key, stream);
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
