// Rotary position embedding, in place: one block per row (one position; with document starts,
// one per row and sample: Note [Document positions] in runtime/op_args.h) in a grid-stride
// loop. The host computes the D/2 frequencies (Note [Rotary frequencies] in runtime/rotary.h:
// the function the CPU kernel calls, so both rotate by the same f32 angles) and passes them by
// value; the block's threads compute the position's cos and sin once into shared memory, then
// rotate every element pair of its q and k heads, consecutive threads on consecutive pairs.
#include <algorithm>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/rotary.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

constexpr int kMaxHalf = static_cast<int>(kRopeMaxHeadDim / 2);

// A block's features in the kernel's index type (Note [Index width]): pairs = samples *
// kv_heads * rotated_heads * half element pairs (samples: the row's micro_batch, or 1 with
// document starts), each rotated head at b * width + g * group_width + h * head_dim.
template <class Index>
struct RowShape {
  Index pairs;
  Index half;
  Index rotated_heads;  // group_size + 1: the q heads, then the k head
  Index kv_heads;
  Index head_dim;
  Index group_width;  // (group_size + 2) * head_dim
  Index width;        // kv_heads * group_width
};

// inv_freq_i for i < D/2, from the host: a kernel argument (indexed in its constant bank).
struct Frequencies {
  float inv_freq[kMaxHalf];
};

// sign 1: the forward rotation (+angle); -1: the backward (-angle). A unit is a row t of all
// samples, or with document_starts (T, B) a row t of sample b (unit t * micro_batch + b).
template <class T, class Index>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(T* qkv, RowShape<Index> shape, Frequencies frequencies, int64_t units,
                int64_t micro_batch, int64_t seq_offset, const int32_t* document_starts,
                float sign) {
  __shared__ float cosines[kMaxHalf], sines[kMaxHalf];
  const Index half = shape.half;
  const int64_t samples = document_starts == nullptr ? micro_batch : 1;  // per unit
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t first_row = unit * samples;  // t * micro_batch + b
    const int64_t position = seq_offset + first_row / micro_batch -
                             (document_starts == nullptr ? 0 : document_starts[first_row]);
    __syncthreads();  // the previous unit's cos and sin read
    for (Index i = threadIdx.x; i < half; i += blockDim.x) {
      const float angle = rotary_angle(position, frequencies.inv_freq[i]);
      cosines[i] = cosf(angle);
      sines[i] = sign * sinf(angle);
    }
    __syncthreads();
    T* row = qkv + first_row * static_cast<int64_t>(shape.width);
    for (Index e = threadIdx.x; e < shape.pairs; e += blockDim.x) {
      const Index i = e % half;
      Index rest = e / half;
      const Index h = rest % shape.rotated_heads;
      rest /= shape.rotated_heads;
      const Index g = rest % shape.kv_heads, b = rest / shape.kv_heads;
      T* x = row + b * shape.width + g * shape.group_width + h * shape.head_dim;
      const float first = to_float(x[i]), second = to_float(x[i + half]);
      x[i] = from_float<T>(first * cosines[i] - second * sines[i]);
      x[i + half] = from_float<T>(second * cosines[i] + first * sines[i]);
    }
  }
}

template <class T>
void launch(T* qkv, const RopeDims& d, float sign, cudaStream_t stream) {
  TRAINER_ASSERT(d.seq >= 0 && d.micro_batch >= 0 && d.kv_heads >= 0 && d.group_size >= 1 &&
                     d.head_dim >= 2 && d.head_dim % 2 == 0 && d.head_dim <= kRopeMaxHeadDim,
                 "rope of seq " << d.seq << ", micro_batch " << d.micro_batch << ", kv_heads "
                                << d.kv_heads << ", group_size " << d.group_size << ", head_dim "
                                << d.head_dim << " (even, 2.." << kRopeMaxHeadDim << ")");
  const int64_t half = d.head_dim / 2, rotated_heads = d.group_size + 1;
  const int64_t group_width = (d.group_size + 2) * d.head_dim, width = d.kv_heads * group_width;
  const int64_t samples = d.document_starts == nullptr ? d.micro_batch : 1;  // per block
  const int64_t pairs = samples * d.kv_heads * rotated_heads * half;
  const int64_t units = d.document_starts == nullptr ? d.seq : d.seq * d.micro_batch;
  if (units == 0 || pairs == 0) return;
  Frequencies frequencies{};
  for (int64_t i = 0; i < half; ++i)
    frequencies.inv_freq[i] = rotary_inv_freq(i, d.head_dim, d.base, d.scaling);
  const unsigned grid = static_cast<unsigned>(std::min(units, kMaxBlocks));
  with_index_type(d.micro_batch * width, [&](auto index) {
    using Index = decltype(index);
    const RowShape<Index> shape{static_cast<Index>(pairs),         static_cast<Index>(half),
                                static_cast<Index>(rotated_heads), static_cast<Index>(d.kv_heads),
                                static_cast<Index>(d.head_dim),    static_cast<Index>(group_width),
                                static_cast<Index>(width)};
    rope_kernel<T, Index><<<grid, kThreads, 0, stream>>>(
        qkv, shape, frequencies, units, d.micro_batch, d.seq_offset, d.document_starts, sign);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void rope_forward(float* qkv, const RopeDims& dims, cudaStream_t stream) {
  launch(qkv, dims, 1.f, stream);
}
void rope_forward(__nv_bfloat16* qkv, const RopeDims& dims, cudaStream_t stream) {
  launch(qkv, dims, 1.f, stream);
}

void rope_backward(float* dqkv, const RopeDims& dims, cudaStream_t stream) {
  launch(dqkv, dims, -1.f, stream);
}
void rope_backward(__nv_bfloat16* dqkv, const RopeDims& dims, cudaStream_t stream) {
  launch(dqkv, dims, -1.f, stream);
}

}  // namespace runtime::cuda
