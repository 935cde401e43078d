// Rotary position embedding, in place: per row (one position), the cos and sin of its D/2 angles
// once (Note [Rotary frequencies] in runtime/rotary.h), then every rotated head of every sample
// of the row; with document starts, per row and sample. Each element is computed alone, so
// results do not depend on threads.
#include "runtime/kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/error.h"
#include "runtime/kernels/cpu/vector_math.h"
#include "runtime/rotary.h"

namespace runtime::cpu {
namespace {

// Rotates by +angle (sign 1, the forward) or -angle (sign -1, the backward).
void rotate(float* qkv, const RopeDims& d, float sign) {
  TRAINER_ASSERT(d.seq >= 0 && d.micro_batch >= 0 && d.kv_heads >= 0 && d.group_size >= 1 &&
                     d.head_dim >= 2 && d.head_dim % 2 == 0,
                 "rope of seq " << d.seq << ", micro_batch " << d.micro_batch << ", kv_heads "
                                << d.kv_heads << ", group_size " << d.group_size << ", head_dim "
                                << d.head_dim << " (even, >= 2)");
  const int64_t half = d.head_dim / 2;
  const int64_t group_width = (d.group_size + 2) * d.head_dim;
  const int64_t width = d.kv_heads * group_width;
  const int64_t rotated_heads = d.group_size + 1;  // the group's q heads, then its k head
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = rotary_inv_freq(i, d.head_dim, d.base, d.scaling);
  // A unit is a row of every sample (they share its position: its cos and sin are computed once)
  // or, with document starts, a row of one sample (unit t * micro_batch + b), as on CUDA.
  const bool documents = d.document_starts != nullptr;
  const int64_t samples_per_position = documents ? 1 : d.micro_batch;
  const int64_t units = documents ? d.seq * d.micro_batch : d.seq;
#pragma omp parallel if (d.seq * d.micro_batch * width >= detail::kMinParallelElements)
  {
    std::vector<float> cosines(static_cast<size_t>(half)), sines(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t first_row = unit * samples_per_position;  // row t * micro_batch + b
      const int64_t t = first_row / std::max<int64_t>(d.micro_batch, 1);
      const int64_t position = d.seq_offset + t - (documents ? d.document_starts[first_row] : 0);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = rotary_angle(position, inv_freq[i]);
        cosines[i] = std::cos(angle);
        sines[i] = sign * std::sin(angle);
      }
      for (int64_t r = first_row; r < first_row + samples_per_position; ++r) {
        float* row = qkv + r * width;
        for (int64_t g = 0; g < d.kv_heads; ++g) {
          for (int64_t h = 0; h < rotated_heads; ++h) {
            float* x = row + g * group_width + h * d.head_dim;
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
              const float first = x[i], second = x[i + half];
              x[i] = first * cosines[i] - second * sines[i];
              x[i + half] = second * cosines[i] + first * sines[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace

void rope_forward(float* qkv, const RopeDims& dims) {
  rotate(qkv, dims, 1.f);
}

void rope_backward(float* dqkv, const RopeDims& dims) {
  rotate(dqkv, dims, -1.f);
}

}  // namespace runtime::cpu
