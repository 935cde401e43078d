// Causal FlashAttention-2 on the device (Note [Flash attention on CUDA] in flash_tiles.cuh),
// whole sequence or one ring block, with or without a sliding window and documents: the forward
// keeps ctx and lse; the backward (Delta, dK/dV, dQ) assigns dqkv (=) or adds into a block's dq,
// dkv (+=), no atomics. bf16 on tensor cores, f32 on the FMA units.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/flash_attention.h"
#include "runtime/kernels/cuda/flash_tiles.cuh"
#include "runtime/philox.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;         // device_common.cuh
using namespace ::runtime::cuda::device::flash;  // flash_tiles.cuh

// ---- the forward ----

// The operands of a forward: q rows, k and v rows (Geometry says where each head's are).
template <class Element>
struct ForwardInputs {
  const Element* q;
  const Element* k;
  const Element* v;
};

// The first key tile a query of the block from query i0 sees: that of i0's first key, the
// block's least; 0 without a window or documents.
__device__ __forceinline__ int first_key_tile(const Geometry& geo, const Head& head, int i0) {
  return max(0, first_visible_key(geo, head, i0)) / kKeyTile * kKeyTile;
}

// The first keys of the lane's queries row0 + lane / 4 (+ 8).
__device__ __forceinline__ void lane_first_keys(int (&row_first_key)[2], const Geometry& geo,
                                                const Head& head, int row0, int lane) {
  row_first_key[0] = first_visible_key(geo, head, row0 + lane / 4);
  row_first_key[1] = first_visible_key(geo, head, row0 + lane / 4 + 8);
}

// One CTA per (sample and head: blockIdx.x, query block: the last first, blockIdx.y). ctx is the
// activation type (the whole sequence) or f32 (a block).
template <class Element, class Out, int kHeadDim>
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(Out* ctx, float* lse, ForwardInputs<Element> in, Geometry geo, float scale,
                         DropoutRule dropout) {
  using Smem = ForwardSmem<Element, kHeadDim>;
  constexpr int kStride = tile_stride<Element, kHeadDim>();
  extern __shared__ __align__(16) unsigned char smem[];
  Element* q_tile = reinterpret_cast<Element*>(smem + Smem::kQ);
  Element* k_tile = reinterpret_cast<Element*>(smem + Smem::kK);
  Element* v_tile = reinterpret_cast<Element*>(smem + Smem::kV);
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  float* staging = reinterpret_cast<float*>(smem + Smem::kStaging) +
                   warp * kWarpRows * staging_stride<kKeyTile>();
  const Head head = head_of(geo, blockIdx.x, blockIdx.z);
  const int i0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int row0 = i0 + warp * kWarpRows;  // the query of the warp's first row
  load_tile<Element, kBlockRows, kHeadDim>(q_tile, in.q + head.q, geo.q_row, i0, geo.T, geo);
  const SmemMatrix<Element, true> q{q_tile + warp * kWarpRows * kStride, kStride};
  const SmemMatrix<Element, true> k{k_tile, kStride};
  const SmemMatrix<Element, false> v{v_tile, kStride};  // B(key, d) of P V
  int row_first_key[2];
  lane_first_keys(row_first_key, geo, head, row0, lane);
  SoftmaxState state = {{-INFINITY, -INFINITY}, {0.f, 0.f}};
  float o[kHeadDim / 8][4] = {};
  const int key_end = min(i0 + kBlockRows + geo.shift, geo.Tk);  // keys the block's queries see
  for (int j0 = first_key_tile(geo, head, i0); j0 < key_end; j0 += kKeyTile) {
    __syncthreads();  // every warp is done with the previous K and V
    load_tile<Element, kKeyTile, kHeadDim>(k_tile, in.k + head.kv, geo.kv_row, j0, geo.Tk, geo);
    load_tile<Element, kKeyTile, kHeadDim>(v_tile, in.v + head.kv, geo.kv_row, j0, geo.Tk, geo);
    __syncthreads();
    // The keep bits before S (Dropout in Note [Flash attention on CUDA]).
    const uint32_t keep = dropout.active ? keep_bits_query_major<kKeyTile / 8>(
                                               dropout, head, geo, row0, j0, row_first_key, lane)
                                         : 0u;
    float s[kKeyTile / 8][4] = {};
    warp_product<kKeyTile / 8, kHeadDim>(s, q, k, lane);
    scale_and_mask(s, scale, geo, row0, j0, row_first_key, lane);
    float rescale[2];
    online_softmax(s, state, rescale);
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[n][0] *= rescale[0];
      o[n][1] *= rescale[0];
      o[n][2] *= rescale[1];
      o[n][3] *= rescale[1];
    }
    if (dropout.active) apply_keep_bits(s, dropout, keep);
    warp_product_from_accumulators<kHeadDim / 8, kKeyTile>(o, s, v, lane, staging);
  }
  float inv_sum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = row_sum(state.sum[r]);
    inv_sum[r] = sum > 0.f ? 1.f / sum : 0.f;  // 0: a query that sees no key (lse -inf)
    const int i = row0 + lane / 4 + 8 * r;
    if (lane % 4 == 0 && i < geo.T) lse[head.rows + i] = state.max[r] + logf(sum);
  }
  store_rows(ctx + head.ctx, geo.ctx_row, o, inv_sum, row0, geo.T, false, geo, lane);
}

// ---- the backward ----

// Grad: the activation type, assigned (the whole sequence's dqkv), or f32, accumulated (a
// block's dq and dkv).
template <class Element, class Grad>
struct BackwardArgs {
  Grad* dq;
  Grad* dk;
  Grad* dv;
  const Element* dctx;
  const Element* q;
  const Element* k;
  const Element* v;
  const float* lse;
  const float* delta;  // (B, H, T): rowsum(dO * O)
  Geometry geo;
  float scale;
  DropoutRule dropout;
  bool accumulate;  // += into dq, dk, dv rather than =
};

// Delta = rowsum(dO * O) per (position, sample, head), a warp per row in a fixed order.
template <class Element>
__global__ void flash_delta_kernel(float* delta, const Element* dctx, const Element* ctx,
                                   int64_t rows, int64_t heads_per_position, Geometry geo) {
  const int lane = threadIdx.x % kWarpThreads;
  const int64_t warps_per_block = blockDim.x / kWarpThreads;
  for (int64_t row = blockIdx.x * warps_per_block + threadIdx.x / kWarpThreads; row < rows;
       row += int64_t{gridDim.x} * warps_per_block) {
    // row = t * B*H + (b * H + h): D elements at row * D in ctx and dctx
    float sum = 0.f;
    for (int d = lane; d < geo.D; d += kWarpThreads)
      sum = fmaf(to_float(dctx[row * geo.D + d]), to_float(ctx[row * geo.D + d]), sum);
    for (int offset = kWarpThreads / 2; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(kFullMask, sum, offset);
    const int64_t t = row / heads_per_position, bh = row % heads_per_position;
    if (lane == 0) delta[bh * geo.T + t] = sum;
  }
}

// One dK/dV step, elementwise: st := P^T F and dpt := dS^T = P^T (dP^T F - Delta) for the
// warp's keys key0 + row and the step's queries i0 + column (0 where masked or query >= T),
// st holding scale K Q^T and `keep` the step's keep bits (keep_bits_key_major); the step's
// lse, Delta and first keys by column.
template <int kN8>
__device__ void key_major_gradients(float (&st)[kN8][4], float (&dpt)[kN8][4],
                                    const float* lse_step, const float* delta_step,
                                    const int* step_first_key, const DropoutRule& dropout,
                                    uint32_t keep, const Geometry& geo, int key0, int i0,
                                    int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = key0 + g + 8 * (e / 2), column = 8 * n + t2 + e % 2, i = i0 + column;
      const int first_key = step_first_key[column];
      const float p =
          !masked(geo, i, j, first_key) && i < geo.T ? expf(st[n][e] - lse_step[column]) : 0.f;
      const float f = dropout.active ? keep_factor(dropout, keep, 4 * n + e) : 1.f;
      dpt[n][e] = lone_key(geo, i, first_key) ? 0.f : p * (dpt[n][e] * f - delta_step[column]);
      st[n][e] = p * f;
    }
  }
}

// The blocks per multiprocessor the dK/dV kernel's launch bounds ask of the compiler. bf16: the
// blocks its registers gave it before the loop over a kv head's query heads (unbounded, the
// compiler spends more on that loop: 168 registers at head_dim 64, one block fewer). f32 (the
// precision reference): 2 at head_dim 64, where 3 spills. scripts/kernel_resources.py checks.
template <class Element, int kHeadDim>
constexpr int dkdv_min_blocks() {
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    return kHeadDim == 32 ? 5 : kHeadDim == 64 ? 4 : 2;
  } else {
    return kHeadDim == 32 ? 4 : 2;
  }
}

// The end of the query steps from first_step on that see a key up to last_key: the first step
// whose first query's first key is past it (no later query sees one: first keys never
// decrease), at most query_end. A binary search over the steps.
__device__ int visible_query_end(const Geometry& geo, const Head& head, int first_step,
                                 int query_end, int last_key) {
  int low = 0, high = (query_end - first_step + kQueryStep - 1) / kQueryStep;
  while (low < high) {  // the steps before low see a key, those from high on do not
    const int middle = (low + high) / 2;
    if (first_visible_key(geo, head, first_step + middle * kQueryStep) <= last_key) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return min(query_end, first_step + low * kQueryStep);
}

// dK and dV of one CTA's 64 keys (blockIdx.y, the first block first) of one sample and kv head
// (blockIdx.x), over its query heads in increasing order and for each over the query steps from
// the first query that sees them to the last that does.
template <class Element, class Grad, int kHeadDim>
__global__ void __launch_bounds__(kFlashThreads, (dkdv_min_blocks<Element, kHeadDim>()))
    flash_dkdv_kernel(BackwardArgs<Element, Grad> args) {
  using Smem = KeyValueSmem<Element, kHeadDim>;
  constexpr int kStride = tile_stride<Element, kHeadDim>();
  extern __shared__ __align__(16) unsigned char smem[];
  Element* k_tile = reinterpret_cast<Element*>(smem + Smem::kK);
  Element* v_tile = reinterpret_cast<Element*>(smem + Smem::kV);
  Element* q_tile = reinterpret_cast<Element*>(smem + Smem::kQ);
  Element* dout_tile = reinterpret_cast<Element*>(smem + Smem::kDout);
  float* lse_step = reinterpret_cast<float*>(smem + Smem::kLse);
  float* delta_step = reinterpret_cast<float*>(smem + Smem::kDelta);
  int* step_first_key = reinterpret_cast<int*>(smem + Smem::kFirstKey);
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  float* staging = reinterpret_cast<float*>(smem + Smem::kStaging) +
                   warp * kWarpRows * staging_stride<kQueryStep>();
  const Geometry& geo = args.geo;
  const int kv_head = blockIdx.x;
  const int j0 = blockIdx.y * kBlockRows;
  const int key0 = j0 + warp * kWarpRows;  // the key of the warp's first row
  const int64_t kv = int64_t{kv_head} * geo.kv_head;
  load_tile<Element, kBlockRows, kHeadDim>(k_tile, args.k + kv, geo.kv_row, j0, geo.Tk, geo);
  load_tile<Element, kBlockRows, kHeadDim>(v_tile, args.v + kv, geo.kv_row, j0, geo.Tk, geo);
  const SmemMatrix<Element, true> k{k_tile + warp * kWarpRows * kStride, kStride};
  const SmemMatrix<Element, true> v{v_tile + warp * kWarpRows * kStride, kStride};
  float dk[kHeadDim / 8][4] = {}, dv[kHeadDim / 8][4] = {};
  const int first_query = max(0, j0 - geo.shift);  // the first query that sees key j0
  const int first_step = first_query / kQueryStep * kQueryStep;
  const int last_key = min(j0 + kBlockRows, geo.Tk) - 1;
  // The kv head's query heads are of one sample: they share their first keys.
  const int query_end =
      visible_query_end(geo, head_of(geo, kv_head, 0), first_step, geo.T, last_key);
  const int steps = max(0, query_end - first_step + kQueryStep - 1) / kQueryStep;  // per head
  // One loop over (query head, step) in that order: its head recomputed per step, nothing of a
  // query head stays live across the steps.
  for (int step = 0; step < geo.group * steps; ++step) {
    const Head head = head_of(geo, kv_head, step / steps);
    const int i0 = first_step + step % steps * kQueryStep;
    __syncthreads();  // every warp is done with the previous step's tiles
    load_tile<Element, kQueryStep, kHeadDim>(q_tile, args.q + head.q, geo.q_row, i0, geo.T, geo);
    load_tile<Element, kQueryStep, kHeadDim>(dout_tile, args.dctx + head.ctx, geo.ctx_row, i0,
                                             geo.T, geo);
    if (threadIdx.x < kQueryStep) {
      const int i = i0 + threadIdx.x;
      lse_step[threadIdx.x] = i < geo.T ? args.lse[head.rows + i] : 0.f;
      delta_step[threadIdx.x] = i < geo.T ? args.delta[head.rows + i] : 0.f;
      step_first_key[threadIdx.x] = first_visible_key(geo, head, i);
    }
    __syncthreads();
    // The warp's keys all follow the step's queries, lie past the keys, or before the first key
    // of all of them (i0's, the step's least).
    if (key0 > i0 + kQueryStep - 1 + geo.shift || key0 >= geo.Tk ||
        key0 + kWarpRows - 1 < step_first_key[0])
      continue;
    float st[kQueryStep / 8][4] = {}, dpt[kQueryStep / 8][4] = {};
    warp_product<kQueryStep / 8, kHeadDim>(st, k, SmemMatrix<Element, true>{q_tile, kStride}, lane);
    warp_product<kQueryStep / 8, kHeadDim>(dpt, v, SmemMatrix<Element, true>{dout_tile, kStride},
                                           lane);
#pragma unroll
    for (int n = 0; n < kQueryStep / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[n][e] *= args.scale;
    const uint32_t keep = args.dropout.active
                              ? keep_bits_key_major<kQueryStep / 8>(args.dropout, head, geo, key0,
                                                                    i0, step_first_key, lane)
                              : 0u;
    key_major_gradients(st, dpt, lse_step, delta_step, step_first_key, args.dropout, keep, geo,
                        key0, i0, lane);
    warp_product_from_accumulators<kHeadDim / 8, kQueryStep>(
        dv, st, SmemMatrix<Element, false>{dout_tile, kStride}, lane, staging);
    warp_product_from_accumulators<kHeadDim / 8, kQueryStep>(
        dk, dpt, SmemMatrix<Element, false>{q_tile, kStride}, lane, staging);
  }
  const float dk_scale[2] = {args.scale, args.scale}, dv_scale[2] = {1.f, 1.f};
  const int64_t dkv = int64_t{kv_head} * geo.dkv_head;
  store_rows(args.dk + dkv, geo.dkv_row, dk, dk_scale, key0, geo.Tk, args.accumulate, geo, lane);
  store_rows(args.dv + dkv, geo.dkv_row, dv, dv_scale, key0, geo.Tk, args.accumulate, geo, lane);
}

// One dQ step, elementwise: dp := dS = P (dP F - Delta) for the warp's queries row0 + row and
// the tile's keys j0 + column, s holding scale Q K^T (and dp already dP F); 0 where masked or
// query >= T, and in the rows of a lone key. lse, delta and first keys: the lane's two queries'.
template <int kN8>
__device__ void query_major_gradients(const float (&s)[kN8][4], float (&dp)[kN8][4],
                                      const float (&lse)[2], const float (&delta)[2],
                                      const int (&row_first_key)[2], const Geometry& geo, int row0,
                                      int j0, int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = row0 + g + 8 * (e / 2), j = j0 + 8 * n + t2 + e % 2;
      const int first_key = row_first_key[e / 2];
      const float p = !masked(geo, i, j, first_key) && i < geo.T ? expf(s[n][e] - lse[e / 2]) : 0.f;
      dp[n][e] = lone_key(geo, i, first_key) ? 0.f : p * (dp[n][e] - delta[e / 2]);
    }
  }
}

// dQ of one CTA's 64 queries (blockIdx.y, the last first) of one sample and head (blockIdx.x),
// over the key tiles from the first one they see up to the diagonal.
template <class Element, class Grad, int kHeadDim>
__global__ void __launch_bounds__(kFlashThreads) flash_dq_kernel(BackwardArgs<Element, Grad> args) {
  using Smem = QuerySmem<Element, kHeadDim>;
  constexpr int kStride = tile_stride<Element, kHeadDim>();
  extern __shared__ __align__(16) unsigned char smem[];
  Element* q_tile = reinterpret_cast<Element*>(smem + Smem::kQ);
  Element* dout_tile = reinterpret_cast<Element*>(smem + Smem::kDout);
  Element* k_tile = reinterpret_cast<Element*>(smem + Smem::kK);
  Element* v_tile = reinterpret_cast<Element*>(smem + Smem::kV);
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  float* staging = reinterpret_cast<float*>(smem + Smem::kStaging) +
                   warp * kWarpRows * staging_stride<kKeyTile>();
  const Geometry& geo = args.geo;
  const Head head = head_of(geo, blockIdx.x, blockIdx.z);
  const int i0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int row0 = i0 + warp * kWarpRows;  // the query of the warp's first row
  load_tile<Element, kBlockRows, kHeadDim>(q_tile, args.q + head.q, geo.q_row, i0, geo.T, geo);
  load_tile<Element, kBlockRows, kHeadDim>(dout_tile, args.dctx + head.ctx, geo.ctx_row, i0, geo.T,
                                           geo);
  float lse[2], delta[2];  // of the lane's queries row0 + lane / 4 (+ 8)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + lane / 4 + 8 * r;
    lse[r] = i < geo.T ? args.lse[head.rows + i] : 0.f;
    delta[r] = i < geo.T ? args.delta[head.rows + i] : 0.f;
  }
  int row_first_key[2];
  lane_first_keys(row_first_key, geo, head, row0, lane);
  const int warp_first_key = first_visible_key(geo, head, row0);  // the least of the warp's
  const SmemMatrix<Element, true> q{q_tile + warp * kWarpRows * kStride, kStride};
  const SmemMatrix<Element, true> dout{dout_tile + warp * kWarpRows * kStride, kStride};
  float dq[kHeadDim / 8][4] = {};
  const int key_end = min(i0 + kBlockRows + geo.shift, geo.Tk);  // keys the block's queries see
  for (int j0 = first_key_tile(geo, head, i0); j0 < key_end; j0 += kKeyTile) {
    __syncthreads();  // every warp is done with the previous K and V
    load_tile<Element, kKeyTile, kHeadDim>(k_tile, args.k + head.kv, geo.kv_row, j0, geo.Tk, geo);
    load_tile<Element, kKeyTile, kHeadDim>(v_tile, args.v + head.kv, geo.kv_row, j0, geo.Tk, geo);
    __syncthreads();
    // The tile's keys all follow the warp's queries, or lie before all their first keys.
    if (j0 > row0 + kWarpRows - 1 + geo.shift || j0 + kKeyTile - 1 < warp_first_key) continue;
    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
    warp_product<kKeyTile / 8, kHeadDim>(s, q, SmemMatrix<Element, true>{k_tile, kStride}, lane);
    warp_product<kKeyTile / 8, kHeadDim>(dp, dout, SmemMatrix<Element, true>{v_tile, kStride},
                                         lane);
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] *= args.scale;
    if (args.dropout.active) {
      const uint32_t keep = keep_bits_query_major<kKeyTile / 8>(args.dropout, head, geo, row0, j0,
                                                                row_first_key, lane);
      apply_keep_bits(dp, args.dropout, keep);
    }
    query_major_gradients(s, dp, lse, delta, row_first_key, geo, row0, j0, lane);
    warp_product_from_accumulators<kHeadDim / 8, kKeyTile>(
        dq, dp, SmemMatrix<Element, false>{k_tile, kStride}, lane, staging);
  }
  const float dq_scale[2] = {args.scale, args.scale};
  store_rows(args.dq + head.dq, geo.dq_row, dq, dq_scale, row0, geo.T, args.accumulate, geo, lane);
}

// ---- launches ----

[[noreturn]] void unsupported(const std::string& what) {
  throw LibraryError("flash attention on CUDA: " + what);
}

// The dims with kv_len and full_len resolved (0 -> seq_len), checked against the kernels'
// limits before any launch.
cpu::FlashAttentionDims checked_dims(const cpu::FlashAttentionDims& dims) {
  cpu::FlashAttentionDims d = dims;
  if (d.kv_len == 0) d.kv_len = d.seq_len;
  if (d.full_len == 0) d.full_len = d.seq_len;
  if (d.seq_len < 1 || d.kv_len < 1 || d.micro_batch < 1 || d.heads < 1)
    unsupported(TRAINER_STR("seq_len, kv_len, micro_batch and heads must be >= 1; got "
                            << d.seq_len << ", " << d.kv_len << ", " << d.micro_batch << ", "
                            << d.heads));
  if (d.group_size < 1 || d.heads % d.group_size != 0)
    unsupported(TRAINER_STR("group_size " << d.group_size << " must divide heads " << d.heads));
  if (d.group_size > kMaxBlocksZ)
    unsupported(
        TRAINER_STR("group_size " << d.group_size << " is over the grid's " << kMaxBlocksZ));
  if (d.head_dim < 1 || d.head_dim > kMaxHeadDim)
    unsupported(TRAINER_STR("head_dim " << d.head_dim << " is outside 1.." << kMaxHeadDim
                                        << " (the model's head dim)"));
  if (!(d.dropout_prob >= 0.f && d.dropout_prob < 1.f))
    unsupported(TRAINER_STR("dropout probability " << d.dropout_prob << " is outside [0, 1)"));
  if (d.window < 0) unsupported(TRAINER_STR("window " << d.window << " is negative"));
  if (d.head_offset < 0 || d.sample_offset < 0)
    unsupported(TRAINER_STR("negative head_offset " << d.head_offset << " or sample_offset "
                                                    << d.sample_offset));
  if (d.q_position < 0 || d.kv_position < 0 || d.q_position + d.seq_len > d.full_len ||
      d.kv_position + d.kv_len > d.full_len || d.full_len > INT_MAX)
    unsupported(TRAINER_STR("queries [" << d.q_position << ", " << d.q_position + d.seq_len
                                        << ") and keys [" << d.kv_position << ", "
                                        << d.kv_position + d.kv_len << ") must lie in [0, full_len "
                                        << d.full_len << "), full_len at most " << INT_MAX));
  const int64_t blocks = (std::max(d.seq_len, d.kv_len) + kBlockRows - 1) / kBlockRows;
  if (blocks > kMaxBlocksY)
    unsupported(TRAINER_STR("seq_len " << d.seq_len << " or kv_len " << d.kv_len << " makes "
                                       << blocks << " blocks of " << kBlockRows
                                       << " rows; the grid takes " << kMaxBlocksY));
  if (d.micro_batch * d.heads > INT_MAX)
    unsupported(
        TRAINER_STR("micro_batch * heads = " << d.micro_batch * d.heads << " is over " << INT_MAX));
  return d;
}

// The whole-sequence entry points take no block (as the CPU twin).
cpu::FlashAttentionDims whole_sequence_dims(const cpu::FlashAttentionDims& dims) {
  if ((dims.kv_len != 0 && dims.kv_len != dims.seq_len) || dims.q_position != 0 ||
      dims.kv_position != 0 || (dims.full_len != 0 && dims.full_len != dims.seq_len))
    unsupported(TRAINER_STR("the whole-sequence kernels take no block (kv_len "
                            << dims.kv_len << ", q_position " << dims.q_position << ", kv_position "
                            << dims.kv_position << ", full_len " << dims.full_len
                            << "): use the block kernels"));
  return checked_dims(dims);
}

// Where q, k, v and their gradients live: element strides of a row, of a kv group and of a
// query head within it (q, dq), of a kv head (k, v, dk, dv).
struct Layout {
  int64_t q_row, q_group, q_head, kv_row, kv_head, dq_row, dq_group, dq_head, dkv_row, dkv_head;
};

// A grouped qkv (Note [Grouped-query attention]): (T, B, G*(r+2)*D), a group's r queries
// before its k and v.
int64_t qkv_group(const cpu::FlashAttentionDims& d) {
  return (d.group_size + 2) * d.head_dim;
}
int64_t kv_groups(const cpu::FlashAttentionDims& d) {
  return d.micro_batch * (d.heads / d.group_size);
}

// The whole sequence: q, k, v (and dq, dk, dv) of each group side by side in qkv (and dqkv).
Layout whole_sequence_layout(const cpu::FlashAttentionDims& d) {
  const int64_t group = qkv_group(d), row = kv_groups(d) * group, D = d.head_dim;
  return Layout{row, group, D, row, group, row, group, D, row, group};
}

// A block: q in qkv, k and v in kv, dq alone, dk and dv in dkv.
Layout block_layout(const cpu::FlashAttentionDims& d) {
  const int64_t D = d.head_dim, kv_row = kv_groups(d) * 2 * D;
  return Layout{kv_groups(d) * qkv_group(d), qkv_group(d),     D, kv_row, 2 * D,
                d.micro_batch * d.heads * D, d.group_size * D, D, kv_row, 2 * D};
}

// `operands` are the tensors tiles are loaded from (whole 16-byte chunks of them when they
// allow); d checked; document_starts (seq_len, micro_batch) on the device, or null.
template <class Element>
Geometry make_geometry(const cpu::FlashAttentionDims& d, const Layout& layout,
                       const int32_t* document_starts,
                       std::initializer_list<const void*> operands) {
  constexpr int64_t kPerChunk = 16 / sizeof(Element);
  bool vector_loads = d.head_dim % kPerChunk == 0;
  for (const void* p : operands) vector_loads = vector_loads && aligned_16(p);
  const uint64_t L = static_cast<uint64_t>(d.full_len);
  Geometry geo;
  geo.T = static_cast<int>(d.seq_len);
  geo.Tk = static_cast<int>(d.kv_len);
  geo.D = static_cast<int>(d.head_dim);
  geo.H = static_cast<int>(d.heads);
  geo.group = static_cast<int>(d.group_size);
  geo.shift = static_cast<int>(d.q_position - d.kv_position);
  // A window of full_len or more masks nothing (Note [Sliding window]): the plain kernels.
  geo.window = d.window < d.full_len ? static_cast<int>(d.window) : 0;
  geo.q_position = d.q_position;
  geo.document_starts = document_starts;
  geo.B = static_cast<int>(d.micro_batch);
  geo.q_row = layout.q_row;
  geo.q_group = layout.q_group;
  geo.q_head = layout.q_head;
  geo.kv_row = layout.kv_row;
  geo.kv_head = layout.kv_head;
  geo.dq_row = layout.dq_row;
  geo.dq_group = layout.dq_group;
  geo.dq_head = layout.dq_head;
  geo.dkv_row = layout.dkv_row;
  geo.dkv_head = layout.dkv_head;
  geo.ctx_row = d.micro_batch * d.heads * d.head_dim;
  geo.head_offset = d.head_offset;
  geo.sample_offset = d.sample_offset;
  geo.full_len = L;
  geo.first_position =
      static_cast<uint64_t>(d.q_position) * L + static_cast<uint64_t>(d.kv_position);
  geo.vector_loads = vector_loads;
  return geo;
}

DropoutRule make_dropout(const cpu::FlashAttentionDims& d) {
  return DropoutRule{d.dropout_prob > 0.f, dropout_threshold(d.dropout_prob),
                     1.0f / (1.0f - d.dropout_prob), d.dropout_key};
}

// One CTA per (sample and kv head: x, block of 64 of `rows` rows: y, and query head of the kv
// head: z, `members` of them: group_size, or 1 for the dK/dV kernel, which loops over them).
dim3 row_block_grid(const cpu::FlashAttentionDims& d, int64_t rows, int64_t members) {
  return dim3(static_cast<unsigned>(kv_groups(d)),
              static_cast<unsigned>((rows + kBlockRows - 1) / kBlockRows),
              static_cast<unsigned>(members));
}

// Lets `kernel` take `bytes` of dynamic smem, or throws when the device has fewer.
void allow_smem(const void* kernel, size_t bytes, const char* name) {
  int device = 0, limit = 0;
  TRAINER_CUDA_CHECK(cudaGetDevice(&device));
  TRAINER_CUDA_CHECK(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit))
    unsupported(TRAINER_STR(name << " needs " << bytes << " bytes of shared memory per block; "
                                 << "device " << device << " has " << limit));
  TRAINER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

// Calls f(std::integral_constant<int, padded head_dim>).
template <class F>
void with_head_dim(int64_t head_dim, F&& f) {
  if (head_dim <= 32) {
    f(std::integral_constant<int, 32>{});
  } else if (head_dim <= 64) {
    f(std::integral_constant<int, 64>{});
  } else {
    static_assert(kMaxHeadDim == 128, "head_dim pads to 32, 64 or 128");
    f(std::integral_constant<int, 128>{});
  }
}

// dims: checked (checked_dims).
template <class Element, class Out>
void launch_forward(Out* ctx, float* lse, const ForwardInputs<Element>& in, const Geometry& geo,
                    const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  with_head_dim(dims.head_dim, [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    constexpr size_t kBytes = ForwardSmem<Element, kHeadDim>::kBytes;
    const auto kernel = flash_forward_kernel<Element, Out, kHeadDim>;
    allow_smem(reinterpret_cast<const void*>(kernel), kBytes, "the flash forward");
    kernel<<<row_block_grid(dims, dims.seq_len, dims.group_size), kFlashThreads, kBytes, stream>>>(
        ctx, lse, in, geo, dims.scale, make_dropout(dims));
    TRAINER_CUDA_CHECK(cudaGetLastError());
  });
}

// Delta, then dK/dV, then dQ; args.delta: scratch, or null (allocated here). dims: checked.
template <class Element, class Grad>
void launch_backward(BackwardArgs<Element, Grad> args, const Element* ctx,
                     const cpu::FlashAttentionDims& dims, void* scratch, cudaStream_t stream) {
  const StreamScratch owned(scratch == nullptr ? flash_attention_backward_scratch_bytes(dims) : 0,
                            stream);
  float* delta = static_cast<float*>(scratch != nullptr ? scratch : owned.get());
  const int64_t heads = dims.micro_batch * dims.heads, rows = dims.seq_len * heads;
  const int64_t delta_blocks =
      (rows + kDeltaThreads / kWarpThreads - 1) / (kDeltaThreads / kWarpThreads);
  flash_delta_kernel<Element>
      <<<static_cast<unsigned>(std::min(delta_blocks, kMaxBlocks)), kDeltaThreads, 0, stream>>>(
          delta, args.dctx, ctx, rows, heads, args.geo);
  TRAINER_CUDA_CHECK(cudaGetLastError());
  args.delta = delta;
  with_head_dim(dims.head_dim, [&](auto head_dim) {
    constexpr int kHeadDim = decltype(head_dim)::value;
    constexpr size_t kKeyValueBytes = KeyValueSmem<Element, kHeadDim>::kBytes;
    constexpr size_t kQueryBytes = QuerySmem<Element, kHeadDim>::kBytes;
    const auto dkdv = flash_dkdv_kernel<Element, Grad, kHeadDim>;
    const auto dq = flash_dq_kernel<Element, Grad, kHeadDim>;
    allow_smem(reinterpret_cast<const void*>(dkdv), kKeyValueBytes, "the flash dK/dV kernel");
    allow_smem(reinterpret_cast<const void*>(dq), kQueryBytes, "the flash dQ kernel");
    dkdv<<<row_block_grid(dims, dims.kv_len, 1), kFlashThreads, kKeyValueBytes, stream>>>(args);
    TRAINER_CUDA_CHECK(cudaGetLastError());
    dq<<<row_block_grid(dims, dims.seq_len, dims.group_size), kFlashThreads, kQueryBytes, stream>>>(
        args);
    TRAINER_CUDA_CHECK(cudaGetLastError());
  });
}

template <class Element>
void whole_forward(Element* ctx, float* lse, const Element* qkv,
                   const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                   cudaStream_t stream) {
  const cpu::FlashAttentionDims d = whole_sequence_dims(dims);
  const Geometry geo = make_geometry<Element>(d, whole_sequence_layout(d), document_starts, {qkv});
  const int64_t k = d.group_size * d.head_dim, v = k + d.head_dim;  // a group's k and v
  launch_forward(ctx, lse, ForwardInputs<Element>{qkv, qkv + k, qkv + v}, geo, d, stream);
}

template <class Element>
void whole_backward(Element* dqkv, const Element* dctx, const Element* qkv, const Element* ctx,
                    const float* lse, const cpu::FlashAttentionDims& dims,
                    const int32_t* document_starts, void* scratch, cudaStream_t stream) {
  const cpu::FlashAttentionDims d = whole_sequence_dims(dims);
  const int64_t k = d.group_size * d.head_dim, v = k + d.head_dim;  // a group's k and v
  const BackwardArgs<Element, Element> args{
      dqkv,     dqkv + k,
      dqkv + v, dctx,
      qkv,      qkv + k,
      qkv + v,  lse,
      nullptr,  make_geometry<Element>(d, whole_sequence_layout(d), document_starts, {qkv, dctx}),
      d.scale,  make_dropout(d),
      false};
  launch_backward(args, ctx, d, scratch, stream);
}

template <class Element>
void block_forward(float* ctx, float* lse, const Element* qkv, const Element* kv,
                   const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                   cudaStream_t stream) {
  const cpu::FlashAttentionDims d = checked_dims(dims);
  const Geometry geo = make_geometry<Element>(d, block_layout(d), document_starts, {qkv, kv});
  launch_forward(ctx, lse, ForwardInputs<Element>{qkv, kv, kv + d.head_dim}, geo, d, stream);
}

template <class Element>
void block_backward(float* dq, float* dkv, const Element* dctx, const Element* qkv,
                    const Element* kv, const Element* ctx, const float* lse,
                    const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                    void* scratch, cudaStream_t stream) {
  const cpu::FlashAttentionDims d = checked_dims(dims);
  const int64_t D = d.head_dim;
  const BackwardArgs<Element, float> args{
      dq,      dkv,
      dkv + D, dctx,
      qkv,     kv,
      kv + D,  lse,
      nullptr, make_geometry<Element>(d, block_layout(d), document_starts, {qkv, kv, dctx}),
      d.scale, make_dropout(d),
      true};
  launch_backward(args, ctx, d, scratch, stream);
}

}  // namespace

size_t flash_attention_backward_scratch_bytes(const cpu::FlashAttentionDims& dims) {
  if (dims.seq_len <= 0 || dims.micro_batch <= 0 || dims.heads <= 0) return 0;
  return static_cast<size_t>(dims.micro_batch * dims.heads * dims.seq_len) * sizeof(float);
}

void flash_attention_forward(float* ctx, float* lse, const float* qkv,
                             const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                             cudaStream_t stream) {
  whole_forward(ctx, lse, qkv, dims, document_starts, stream);
}
void flash_attention_forward(__nv_bfloat16* ctx, float* lse, const __nv_bfloat16* qkv,
                             const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                             cudaStream_t stream) {
  whole_forward(ctx, lse, qkv, dims, document_starts, stream);
}

void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const cpu::FlashAttentionDims& dims,
                              const int32_t* document_starts, void* scratch, cudaStream_t stream) {
  whole_backward(dqkv, dctx, qkv, ctx, lse, dims, document_starts, scratch, stream);
}
void flash_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dctx,
                              const __nv_bfloat16* qkv, const __nv_bfloat16* ctx, const float* lse,
                              const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                              void* scratch, cudaStream_t stream) {
  whole_backward(dqkv, dctx, qkv, ctx, lse, dims, document_starts, scratch, stream);
}

void flash_block_forward(float* ctx, float* lse, const float* qkv, const float* kv,
                         const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                         cudaStream_t stream) {
  block_forward(ctx, lse, qkv, kv, dims, document_starts, stream);
}
void flash_block_forward(float* ctx, float* lse, const __nv_bfloat16* qkv, const __nv_bfloat16* kv,
                         const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                         cudaStream_t stream) {
  block_forward(ctx, lse, qkv, kv, dims, document_starts, stream);
}

void flash_block_backward(float* dq, float* dkv, const float* dctx, const float* qkv,
                          const float* kv, const float* ctx, const float* lse,
                          const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                          void* scratch, cudaStream_t stream) {
  block_backward(dq, dkv, dctx, qkv, kv, ctx, lse, dims, document_starts, scratch, stream);
}
void flash_block_backward(float* dq, float* dkv, const __nv_bfloat16* dctx,
                          const __nv_bfloat16* qkv, const __nv_bfloat16* kv,
                          const __nv_bfloat16* ctx, const float* lse,
                          const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                          void* scratch, cudaStream_t stream) {
  block_backward(dq, dkv, dctx, qkv, kv, ctx, lse, dims, document_starts, scratch, stream);
}

}  // namespace runtime::cuda
