// Causal FlashAttention-2 on the device (Note [Flash attention on CUDA]), whole sequence or one
// ring block: the forward keeps ctx and lse; the backward (Delta, dK/dV, dQ) assigns dqkv (=) or
// adds into a block's dq, dkv (+=), no atomics. bf16 on tensor cores, f32 on the FMA units.
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
#include "runtime/philox.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

// Note [Flash attention on CUDA]
// The semantics are the CPU twin's (Note [Flash attention on the host]); this is how the device
// computes them.
//
// Tiles. A CTA is 4 warps, and each warp owns 16 rows of the CTA's 64-row block: it computes its
// rows of every product, C(16 x N) += A(16 x K) B(K x N), alone. bf16 products are
// mma.sync.m16n8k16 (bf16 operands, fp32 accumulators); f32 products are FMAs that produce the
// same accumulator layout, in which lane l holds rows l/4 and l/4 + 8 and columns 2(l%4) and
// 2(l%4) + 1 of every 8 columns. Masking, softmax and dropout are written once, on that layout,
// for both types. Operands are tiles in shared memory with head_dim padded with zeros to 32, 64
// or 128 (the MMA's K is 16) and rows past T zero; each smem row carries 16 bytes of padding,
// so the fragment loads of a warp fall in 32 different banks.
// Forward: a CTA per (sample and head, 64 queries), the last query blocks (the most keys)
// first. Per key tile of 64, up to the diagonal (later tiles are never loaded): S = scale Q K^T,
// -inf where key > query (in tiles that cross the diagonal), then the CPU's online softmax
// (running max m, running sum l, O rescaled), P * F (dropout) and O += (P F) V, with P F read
// from the accumulators as the MMA's A operand (rounded to bf16 first, as FlashAttention-2
// does; the f32 path stages it through shared memory). ctx = O / l, lse = m + log l.
// Backward: Delta = rowsum(dO * O), a warp per row. dK/dV: a CTA per (sample and head, 64
// keys), each warp 16 keys, over query steps of 32 from the diagonal on: S^T = scale K Q^T,
// P^T = exp(S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T F - Delta), dV += (P^T F) dO and
// dK += dS^T Q, P^T F and dS^T read from the accumulators: key-major tiles need no transpose.
// dQ: a CTA per (sample and head, 64 queries), over key tiles of 64 up to the diagonal: S, P,
// dP, dS as above, dQ += dS K. dK and dQ are multiplied by scale when written. The dK/dV steps
// hold 32 queries so that dK, dV (64 + 64 accumulators at head_dim 128) and two 16 x 32 tiles
// fit a lane's registers. Query 0 sees one key, so its softmax is the constant 1 and its dS is
// exactly 0: the kernels write that 0 ("lone key") rather than the rounding noise of
// dP F - Delta, two equal sums taken in different orders (the host, summing in yet other
// orders, often cancels them exactly, and the op twins demand a 0 wherever the host has one).
//
// Dropout. Element (query i, key j) of local head h and sample b is element
// ((head_offset + h) L + q_position + i) L + kv_position + j of global sample sample_offset + b
// (L = full_len; T and 0 for the whole sequence; Note [Dropout RNG]), drawn
// where its tile is computed, into a keep bit per element of the lane (32 bits cover a lane's
// 16 x 64 tile) by a loop that is not unrolled, so one Philox body is live at a time and the
// unrolled tile code only tests bits. The forward and dQ draw a lane's two consecutive keys from
// one Philox block (two when they straddle blocks); dK/dV, whose lanes hold consecutive queries,
// draws each element alone. Kept iff bits >= threshold, then scaled by keep_scale =
// 1.0f / (1.0f - p); the host computes both as the CPU twin does. Masked elements and queries
// past T draw nothing.
//
// Blocks (Note [Flash blocks]). The same kernels run a query block of qkv against a key block of
// kv: Geometry holds where q, k, v and their gradients live, the key rows Tk, and shift =
// q_position - kv_position, so key j is masked for query i iff j > i + shift or j >= Tk. The
// forward writes f32 ctx; the backward adds (+=) into f32 dq and dkv, each element by its one
// writer as before. Key tiles past the last visible key are not loaded; the dK/dV steps start
// at the first query that sees the CTA's first key. The lone key is that of global query 0.
//
// Determinism. Every output element belongs to one lane of one CTA and is summed in a fixed
// order (k steps, then tiles, then a fixed butterfly over the 4 lanes of a row); dK/dV and dQ
// are separate kernels, so nothing is summed across CTAs and there are no atomics.

constexpr int kWarps = 4;
constexpr int kFlashThreads = kWarps * kWarpThreads;  // 128
constexpr int kWarpRows = 16;                         // M of mma.m16n8k16
constexpr int kBlockRows = kWarps * kWarpRows;        // queries (forward, dQ) or keys (dK/dV)
constexpr int kKeyTile = 64;                          // keys per step of the forward and dQ
constexpr int kQueryStep = 32;                        // queries per step of dK/dV
constexpr int kMaxHeadDim = static_cast<int>(::runtime::cpu::kFlashMaxHeadDim);
constexpr int64_t kMaxBlocksY = 65535;  // gridDim.y: row blocks of one head
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kDeltaThreads = 256;  // the Delta kernel: a warp per row

// ---- shapes and coordinates ----

// Sizes and coordinates of one call, as the kernels take them. Queries and their gradient
// live in rows of q_row elements, bh * q_head apart per (sample, head); keys, values and
// theirs in rows of kv_row, kv_head apart (qkv itself for the whole sequence; qkv and kv for a
// block, whose gradients dq and dkv have their own strides).
struct Geometry {
  int T;                      // query rows (seq_len)
  int Tk;                     // key rows (kv_len)
  int D;                      // head_dim
  int H;                      // local heads
  int shift;                  // q_position - kv_position: key j is visible to query i iff
                              // j <= i + shift (0 for the whole sequence)
  int64_t q_position;         // global position of query 0 (the query of one key is global 0)
  int64_t q_row, q_head;      // of q (in qkv)
  int64_t kv_row, kv_head;    // of k and v
  int64_t dq_row, dq_head;    // of dq
  int64_t dkv_row, dkv_head;  // of dk and dv
  int64_t ctx_row;            // of ctx and dctx: B*H*D
  int64_t head_offset;        // global index of local head 0
  int64_t sample_offset;      // global index of local sample 0
  uint64_t full_len;          // L: the dropout coordinates' row length
  uint64_t first_position;    // q_position * L + kv_position
  bool vector_loads;          // tiles load 16 bytes at a time (D and the operands allow it)
};

// The dropout of one call (Note [Dropout RNG]); the host computes threshold and keep_scale.
struct DropoutRule {
  bool active;         // p > 0
  uint32_t threshold;  // kept iff bits >= threshold
  float keep_scale;    // 1.0f / (1.0f - p)
  DropoutKey key;
};

// One (sample, head): where it lives in the tensors and in the dropout coordinates.
struct Head {
  int64_t q;               // its row 0 in q
  int64_t kv;              // in k and v
  int64_t dq;              // in dq
  int64_t dkv;             // in dk and dv
  int64_t ctx;             // position 0 in ctx and dctx
  int64_t rows;            // position 0 in lse and Delta: (b * H + h) * T
  uint64_t first_element;  // dropout element of (query 0, key 0): ((head_offset + h) * L +
                           // q_position) * L + kv_position
  uint64_t sample;         // global sample index
};

__device__ Head head_of(const Geometry& geo, int bh) {
  const int b = bh / geo.H, h = bh % geo.H;
  Head head;
  head.q = int64_t{bh} * geo.q_head;
  head.kv = int64_t{bh} * geo.kv_head;
  head.dq = int64_t{bh} * geo.dq_head;
  head.dkv = int64_t{bh} * geo.dkv_head;
  head.ctx = int64_t{bh} * geo.D;
  head.rows = int64_t{bh} * geo.T;
  head.first_element =
      static_cast<uint64_t>(geo.head_offset + h) * geo.full_len * geo.full_len + geo.first_position;
  head.sample = static_cast<uint64_t>(geo.sample_offset + b);
  return head;
}

// Key j is masked for query i (both local rows): after it, or past the key rows.
__device__ __forceinline__ bool masked(const Geometry& geo, int i, int j) {
  return j > i + geo.shift || j >= geo.Tk;
}

// ---- shared memory ----

// Elements per smem row of a tile: the padded head_dim and 16 bytes more.
template <class Element, int kHeadDim>
constexpr int tile_stride() {
  return kHeadDim + 16 / static_cast<int>(sizeof(Element));
}
template <class Element, int kHeadDim>
constexpr size_t tile_bytes(int rows) {
  return static_cast<size_t>(rows) * tile_stride<Element, kHeadDim>() * sizeof(Element);
}
// The f32 path stages a warp's 16 x kCols accumulator tile (P or dS) in smem rows of this many
// floats; bf16 needs no staging.
template <int kCols>
constexpr int staging_stride() {
  return kCols + 4;
}
template <class Element, int kCols>
constexpr size_t staging_bytes() {
  return std::is_same_v<Element, float> ? size_t{kWarps} * kWarpRows * staging_stride<kCols>() * 4
                                        : 0;
}

// Byte offsets of each kernel's smem regions (one definition for the kernel and its launch).
template <class Element, int kHeadDim>
struct ForwardSmem {
  static constexpr size_t kQ = 0;  // (kBlockRows, stride)
  static constexpr size_t kK = kQ + tile_bytes<Element, kHeadDim>(kBlockRows);
  static constexpr size_t kV = kK + tile_bytes<Element, kHeadDim>(kKeyTile);
  static constexpr size_t kStaging = kV + tile_bytes<Element, kHeadDim>(kKeyTile);
  static constexpr size_t kBytes = kStaging + staging_bytes<Element, kKeyTile>();
};
template <class Element, int kHeadDim>
struct KeyValueSmem {              // the dK/dV kernel
  static constexpr size_t kK = 0;  // (kBlockRows, stride): the CTA's keys
  static constexpr size_t kV = kK + tile_bytes<Element, kHeadDim>(kBlockRows);
  static constexpr size_t kQ = kV + tile_bytes<Element, kHeadDim>(kBlockRows);  // (kQueryStep, .)
  static constexpr size_t kDout = kQ + tile_bytes<Element, kHeadDim>(kQueryStep);
  static constexpr size_t kLse = kDout + tile_bytes<Element, kHeadDim>(kQueryStep);  // kQueryStep
  static constexpr size_t kDelta = kLse + kQueryStep * sizeof(float);                // kQueryStep
  static constexpr size_t kStaging = kDelta + kQueryStep * sizeof(float);
  static constexpr size_t kBytes = kStaging + staging_bytes<Element, kQueryStep>();
};
template <class Element, int kHeadDim>
struct QuerySmem {                 // the dQ kernel
  static constexpr size_t kQ = 0;  // (kBlockRows, stride): the CTA's queries
  static constexpr size_t kDout = kQ + tile_bytes<Element, kHeadDim>(kBlockRows);
  static constexpr size_t kK = kDout + tile_bytes<Element, kHeadDim>(kBlockRows);  // (kKeyTile, .)
  static constexpr size_t kV = kK + tile_bytes<Element, kHeadDim>(kKeyTile);
  static constexpr size_t kStaging = kV + tile_bytes<Element, kHeadDim>(kKeyTile);
  static constexpr size_t kBytes = kStaging + staging_bytes<Element, kKeyTile>();
};

// Rows [row0, row0 + kRows) of one head's D features (row r at src + r * row_elements) into a
// smem tile of kRows x tile_stride, zero from rows_end on (T or Tk) and past D. All threads of
// the CTA take part.
template <class Element, int kRows, int kHeadDim>
__device__ void load_tile(Element* tile, const Element* src, int64_t row_elements, int row0,
                          int rows_end, const Geometry& geo) {
  constexpr int kStride = tile_stride<Element, kHeadDim>();
  if (geo.vector_loads) {  // D is a multiple of kPerChunk: a chunk is wholly inside or past D
    constexpr int kPerChunk = 16 / static_cast<int>(sizeof(Element));
    constexpr int kChunks = kHeadDim / kPerChunk;  // per row
    constexpr int kPerThread = kRows * kChunks / kFlashThreads;
    static_assert(kRows * kChunks % kFlashThreads == 0, "every thread loads as many chunks");
    uint4 chunks[kPerThread];  // all loads in flight before the first store
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = threadIdx.x + k * kFlashThreads, r = c / kChunks, d = c % kChunks * kPerChunk;
      chunks[k] = row0 + r < rows_end && d < geo.D
                      ? *reinterpret_cast<const uint4*>(src + (row0 + r) * row_elements + d)
                      : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int c = threadIdx.x + k * kFlashThreads, r = c / kChunks, d = c % kChunks * kPerChunk;
      *reinterpret_cast<uint4*>(tile + r * kStride + d) = chunks[k];
    }
  } else {
    for (int c = threadIdx.x; c < kRows * kHeadDim; c += kFlashThreads) {
      const int r = c / kHeadDim, d = c % kHeadDim;
      tile[r * kStride + d] = row0 + r < rows_end && d < geo.D ? src[(row0 + r) * row_elements + d]
                                                               : from_float<Element>(0.f);
    }
  }
}

// ---- warp products in the accumulator layout (Note [Flash attention on CUDA]) ----

// A matrix in shared memory addressed by (row, k): base[row * stride + k] when kKContiguous,
// else base[k * stride + row].
template <class Element, bool kKContiguous>
struct SmemMatrix {
  const Element* base;
  int stride;
  __device__ const Element& at(int row, int k) const {
    return kKContiguous ? base[row * stride + k] : base[k * stride + row];
  }
};

// Elements (row, k) and (row, k + 1) as the two bf16 halves of a register, k's in the low half.
__device__ __forceinline__ uint32_t load_pair(const SmemMatrix<__nv_bfloat16, true>& m, int row,
                                              int k) {
  return *reinterpret_cast<const uint32_t*>(&m.at(row, k));  // k even: 4-byte aligned
}
__device__ __forceinline__ uint32_t load_pair(const SmemMatrix<__nv_bfloat16, false>& m, int row,
                                              int k) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(m.base);
  return uint32_t{bits[k * m.stride + row]} | uint32_t{bits[(k + 1) * m.stride + row]} << 16;
}

__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));  // a register move; a pointer cast would break aliasing
  return bits;
}

// c += a b on one 16 x 8 x 16 tile: a (16 x 16, row major) and b (16 x 8, column major) in the
// fragment layout of mma.m16n8k16, bf16; c fp32.
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
#if defined(TRAINER_HOST_CUDA)
  ::host_cuda::warp_mma_m16n8k16_bf16(c, a, b);  // the tests' host execution of this file
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// c (16 x 8 kN8) += A (16 x kK) B (kK x 8 kN8) with A(r, k) = a.at(r, k), B(k, n) = b.at(n, k).
template <int kN8, int kK, bool kAContiguous, bool kBContiguous>
__device__ __forceinline__ void warp_product(float (&c)[kN8][4],
                                             const SmemMatrix<__nv_bfloat16, kAContiguous>& a,
                                             const SmemMatrix<__nv_bfloat16, kBContiguous>& b,
                                             int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int k0 = 0; k0 < kK; k0 += 16) {
    const uint32_t af[4] = {load_pair(a, g, k0 + t2), load_pair(a, g + 8, k0 + t2),
                            load_pair(a, g, k0 + t2 + 8), load_pair(a, g + 8, k0 + t2 + 8)};
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
      const uint32_t bf[2] = {load_pair(b, 8 * n + g, k0 + t2),
                              load_pair(b, 8 * n + g, k0 + t2 + 8)};
      mma_bf16_16816(c[n], af, bf);
    }
  }
}
template <int kN8, int kK, bool kAContiguous, bool kBContiguous>
__device__ __forceinline__ void warp_product(float (&c)[kN8][4],
                                             const SmemMatrix<float, kAContiguous>& a,
                                             const SmemMatrix<float, kBContiguous>& b, int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll 4
  for (int k = 0; k < kK; ++k) {
    const float a0 = a.at(g, k), a1 = a.at(g + 8, k);
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
      const float b0 = b.at(8 * n + t2, k), b1 = b.at(8 * n + t2 + 1, k);
      c[n][0] = fmaf(a0, b0, c[n][0]);
      c[n][1] = fmaf(a0, b1, c[n][1]);
      c[n][2] = fmaf(a1, b0, c[n][2]);
      c[n][3] = fmaf(a1, b1, c[n][3]);
    }
  }
}

// c (16 x 8 kN8) += P (16 x kK) B, P a warp's accumulator tile (kK / 8 blocks of 8 columns):
// bf16 rounds P into A fragments in registers, f32 stages P in the warp's smem rows.
template <int kN8, int kK, bool kBContiguous>
__device__ __forceinline__ void warp_product_from_accumulators(
    float (&c)[kN8][4], const float (&p)[kK / 8][4],
    const SmemMatrix<__nv_bfloat16, kBContiguous>& b, int lane, float* /*staging*/) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int kb = 0; kb < kK / 16; ++kb) {
    const uint32_t af[4] = {pack_bf16(p[2 * kb][0], p[2 * kb][1]),
                            pack_bf16(p[2 * kb][2], p[2 * kb][3]),
                            pack_bf16(p[2 * kb + 1][0], p[2 * kb + 1][1]),
                            pack_bf16(p[2 * kb + 1][2], p[2 * kb + 1][3])};
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
      const uint32_t bf[2] = {load_pair(b, 8 * n + g, 16 * kb + t2),
                              load_pair(b, 8 * n + g, 16 * kb + t2 + 8)};
      mma_bf16_16816(c[n], af, bf);
    }
  }
}
template <int kN8, int kK, bool kBContiguous>
__device__ __forceinline__ void warp_product_from_accumulators(
    float (&c)[kN8][4], const float (&p)[kK / 8][4], const SmemMatrix<float, kBContiguous>& b,
    int lane, float* staging) {
  constexpr int kStride = staging_stride<kK>();
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kK / 8; ++n) {
    staging[g * kStride + 8 * n + t2] = p[n][0];
    staging[g * kStride + 8 * n + t2 + 1] = p[n][1];
    staging[(g + 8) * kStride + 8 * n + t2] = p[n][2];
    staging[(g + 8) * kStride + 8 * n + t2 + 1] = p[n][3];
  }
  __syncwarp();
  warp_product<kN8, kK>(c, SmemMatrix<float, true>{staging, kStride}, b, lane);
  __syncwarp();  // the staging rows are free again
}

// ---- masking, softmax, dropout on the accumulator layout ----

// Word `word` (0..3) of a Philox block, without indexing the array by a runtime value.
__device__ __forceinline__ uint32_t philox_word(const Philox4x32& block, uint64_t word) {
  return word == 0 ? block.v[0] : word == 1 ? block.v[1] : word == 2 ? block.v[2] : block.v[3];
}

__device__ __forceinline__ Philox4x32 philox_block(const DropoutRule& rule, uint64_t sample,
                                                   uint64_t block) {
  const Philox4x32 counter{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                            static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
  return philox4x32_10(counter, rule.key.key0, rule.key.key1);
}

// The dropout keep bits of a lane's elements of a warp tile: element e of accumulator block n
// is bit 4 n + e, set when kept; masked elements and queries past T get 0.
// The draws run in a loop that is not unrolled, so one Philox body is live at a time, and the
// unrolled loops over the tile test bits.

// Query-major tiles (forward, dQ): the lane's two keys j0 + 8n + t2 (+ 1) of query row0 + g (+ 8)
// are consecutive elements, drawn from one Philox block (two when they straddle blocks).
template <int kN8>
__device__ uint32_t keep_bits_query_major(const DropoutRule& rule, const Head& head,
                                          const Geometry& geo, int row0, int j0, int lane) {
  static_assert(4 * kN8 <= 32, "a bit per element of the lane");
  const int g = lane / 4, t2 = lane % 4 * 2;
  uint32_t keep = 0;
#pragma unroll 1
  for (int pair = 0; pair < 2 * kN8; ++pair) {  // pair 2n + r: bits 4n + 2r and 4n + 2r + 1
    const int n = pair / 2, r = pair % 2;
    const int i = row0 + g + 8 * r, j = j0 + 8 * n + t2;
    if (i >= geo.T || masked(geo, i, j)) continue;
    const uint64_t element = head.first_element + static_cast<uint64_t>(i) * geo.full_len + j;
    const uint64_t word = element & 3;
    const Philox4x32 block = philox_block(rule, head.sample, element >> 2);
    uint32_t next_bits;  // of element + 1
    if (word == 3) {
      next_bits = philox_block(rule, head.sample, (element >> 2) + 1).v[0];
    } else {
      next_bits = philox_word(block, word + 1);
    }
    const uint32_t kept = uint32_t{philox_word(block, word) >= rule.threshold} |
                          uint32_t{next_bits >= rule.threshold} << 1;
    keep |= kept << (2 * pair);
  }
  return keep;
}

// Key-major tiles (dK/dV): element e of block n is key key0 + g + 8 (e / 2) of query
// i0 + 8n + t2 + e % 2; consecutive elements belong to different queries, so each is drawn alone.
template <int kN8>
__device__ uint32_t keep_bits_key_major(const DropoutRule& rule, const Head& head,
                                        const Geometry& geo, int key0, int i0, int lane) {
  static_assert(4 * kN8 <= 32, "a bit per element of the lane");
  const int g = lane / 4, t2 = lane % 4 * 2;
  uint32_t keep = 0;
#pragma unroll 1
  for (int bit = 0; bit < 4 * kN8; ++bit) {
    const int n = bit / 4, e = bit % 4;
    const int j = key0 + g + 8 * (e / 2), i = i0 + 8 * n + t2 + e % 2;
    if (i >= geo.T || masked(geo, i, j)) continue;
    const uint64_t element = head.first_element + static_cast<uint64_t>(i) * geo.full_len + j;
    const uint32_t bits = philox_word(philox_block(rule, head.sample, element >> 2), element & 3);
    keep |= uint32_t{bits >= rule.threshold} << bit;
  }
  return keep;
}

// The dropout factor F of bit `bit`: keep_scale when kept, else 0.
__device__ __forceinline__ float keep_factor(const DropoutRule& rule, uint32_t keep, int bit) {
  return keep >> bit & 1 ? rule.keep_scale : 0.f;
}

// x *= F, element by element.
template <int kN8>
__device__ void apply_keep_bits(float (&x)[kN8][4], const DropoutRule& rule, uint32_t keep) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[n][e] *= keep_factor(rule, keep, 4 * n + e);
}

// s := scale * s, and -inf where key j0 + column is masked for query row0 + row, when the tile
// crosses the warp's diagonal or the end of the keys.
template <int kN8>
__device__ void scale_and_mask(float (&s)[kN8][4], float scale, const Geometry& geo, int row0,
                               int j0, int lane) {
  const bool crosses = j0 + 8 * kN8 - 1 > row0 + geo.shift || j0 + 8 * kN8 > geo.Tk;
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = row0 + g + 8 * (e / 2), j = j0 + 8 * n + t2 + e % 2;
      s[n][e] = crosses && masked(geo, i, j) ? -INFINITY : scale * s[n][e];
    }
  }
}

// The online softmax of the forward, per lane: running max m of its two rows and the lane's
// share of their running sums l (its columns only; the 4 lanes of a row add up at the end).
struct SoftmaxState {
  float max[2];
  float sum[2];
};

// Folds a tile of scaled, masked scores into the state (the CPU twin's online_softmax): s :=
// exp(s - m'), l := l exp(m - m') + sum of the new s, m := m'; rescale = exp(m - m').
template <int kN8>
__device__ void online_softmax(float (&s)[kN8][4], SoftmaxState& state, float (&rescale)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < kN8; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
    const float new_max = fmaxf(state.max[r], tile_max);
    const float reference = new_max == -INFINITY ? 0.f : new_max;  // a row masked so far
    rescale[r] = expf(state.max[r] - reference);                   // m = -inf gives 0
    state.max[r] = new_max;
    float lane_sum = 0.f;
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
      s[n][2 * r] = expf(s[n][2 * r] - reference);  // masked -inf gives 0
      s[n][2 * r + 1] = expf(s[n][2 * r + 1] - reference);
      lane_sum += s[n][2 * r] + s[n][2 * r + 1];
    }
    state.sum[r] = state.sum[r] * rescale[r] + lane_sum;
  }
}

// The sum of x over the 4 lanes of a row, the same in each of them (a + b == b + a).
__device__ __forceinline__ float row_sum(float x) {
  x += __shfl_xor_sync(kFullMask, x, 1);
  return x + __shfl_xor_sync(kFullMask, x, 2);
}

// Writes (or adds, when accumulate) a warp's accumulator tile, times `scale`, to rows
// row0 + r < rows_end at out + row * row_elements, columns d < D. Each element has one writer.
template <class Out, int kN8>
__device__ void store_rows(Out* out, int64_t row_elements, const float (&x)[kN8][4],
                           const float (&scale)[2], int row0, int rows_end, bool accumulate,
                           const Geometry& geo, int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + g + 8 * r;
    if (row >= rows_end) continue;
    Out* dst = out + row * row_elements;
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int d = 8 * n + t2 + c;
        if (d >= geo.D) continue;
        const float value = x[n][2 * r + c] * scale[r];
        dst[d] = from_float<Out>(accumulate ? to_float(dst[d]) + value : value);
      }
    }
  }
}

// ---- the forward ----

// The operands of a forward: q rows, k and v rows (Geometry says where each head's are).
template <class Element>
struct ForwardInputs {
  const Element* q;
  const Element* k;
  const Element* v;
};

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
  const Head head = head_of(geo, blockIdx.x);
  const int i0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int row0 = i0 + warp * kWarpRows;  // the query of the warp's first row
  load_tile<Element, kBlockRows, kHeadDim>(q_tile, in.q + head.q, geo.q_row, i0, geo.T, geo);
  const SmemMatrix<Element, true> q{q_tile + warp * kWarpRows * kStride, kStride};
  const SmemMatrix<Element, true> k{k_tile, kStride};
  const SmemMatrix<Element, false> v{v_tile, kStride};  // B(key, d) of P V
  SoftmaxState state = {{-INFINITY, -INFINITY}, {0.f, 0.f}};
  float o[kHeadDim / 8][4] = {};
  const int key_end = min(i0 + kBlockRows + geo.shift, geo.Tk);  // keys the block's queries see
  for (int j0 = 0; j0 < key_end; j0 += kKeyTile) {
    __syncthreads();  // every warp is done with the previous K and V
    load_tile<Element, kKeyTile, kHeadDim>(k_tile, in.k + head.kv, geo.kv_row, j0, geo.Tk, geo);
    load_tile<Element, kKeyTile, kHeadDim>(v_tile, in.v + head.kv, geo.kv_row, j0, geo.Tk, geo);
    __syncthreads();
    float s[kKeyTile / 8][4] = {};
    warp_product<kKeyTile / 8, kHeadDim>(s, q, k, lane);
    scale_and_mask(s, scale, geo, row0, j0, lane);
    float rescale[2];
    online_softmax(s, state, rescale);
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[n][0] *= rescale[0];
      o[n][1] *= rescale[0];
      o[n][2] *= rescale[1];
      o[n][3] *= rescale[1];
    }
    if (dropout.active)
      apply_keep_bits(s, dropout,
                      keep_bits_query_major<kKeyTile / 8>(dropout, head, geo, row0, j0, lane));
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
// st holding scale K Q^T and `keep` the step's keep bits (keep_bits_key_major).
template <int kN8>
__device__ void key_major_gradients(float (&st)[kN8][4], float (&dpt)[kN8][4],
                                    const float* lse_step, const float* delta_step,
                                    const DropoutRule& dropout, uint32_t keep, const Geometry& geo,
                                    int key0, int i0, int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = key0 + g + 8 * (e / 2), column = 8 * n + t2 + e % 2, i = i0 + column;
      const float p = !masked(geo, i, j) && i < geo.T ? expf(st[n][e] - lse_step[column]) : 0.f;
      const float f = dropout.active ? keep_factor(dropout, keep, 4 * n + e) : 1.f;
      const bool lone_key = geo.q_position + i == 0;
      dpt[n][e] = lone_key ? 0.f : p * (dpt[n][e] * f - delta_step[column]);
      st[n][e] = p * f;
    }
  }
}

// dK and dV of one CTA's 64 keys (blockIdx.y, the first block first) of one sample and head
// (blockIdx.x), over the query steps from the first query that sees them on.
template <class Element, class Grad, int kHeadDim>
__global__ void __launch_bounds__(kFlashThreads)
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
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  float* staging = reinterpret_cast<float*>(smem + Smem::kStaging) +
                   warp * kWarpRows * staging_stride<kQueryStep>();
  const Geometry& geo = args.geo;
  const Head head = head_of(geo, blockIdx.x);
  const int j0 = blockIdx.y * kBlockRows;
  const int key0 = j0 + warp * kWarpRows;  // the key of the warp's first row
  load_tile<Element, kBlockRows, kHeadDim>(k_tile, args.k + head.kv, geo.kv_row, j0, geo.Tk, geo);
  load_tile<Element, kBlockRows, kHeadDim>(v_tile, args.v + head.kv, geo.kv_row, j0, geo.Tk, geo);
  const SmemMatrix<Element, true> k{k_tile + warp * kWarpRows * kStride, kStride};
  const SmemMatrix<Element, true> v{v_tile + warp * kWarpRows * kStride, kStride};
  float dk[kHeadDim / 8][4] = {}, dv[kHeadDim / 8][4] = {};
  const int first_query = max(0, j0 - geo.shift);  // the first query that sees key j0
  for (int i0 = first_query / kQueryStep * kQueryStep; i0 < geo.T; i0 += kQueryStep) {
    __syncthreads();  // every warp is done with the previous step's tiles
    load_tile<Element, kQueryStep, kHeadDim>(q_tile, args.q + head.q, geo.q_row, i0, geo.T, geo);
    load_tile<Element, kQueryStep, kHeadDim>(dout_tile, args.dctx + head.ctx, geo.ctx_row, i0,
                                             geo.T, geo);
    if (threadIdx.x < kQueryStep) {
      const int i = i0 + threadIdx.x;
      lse_step[threadIdx.x] = i < geo.T ? args.lse[head.rows + i] : 0.f;
      delta_step[threadIdx.x] = i < geo.T ? args.delta[head.rows + i] : 0.f;
    }
    __syncthreads();
    // The warp's keys all follow the step's queries, or lie past the keys.
    if (key0 > i0 + kQueryStep - 1 + geo.shift || key0 >= geo.Tk) continue;
    float st[kQueryStep / 8][4] = {}, dpt[kQueryStep / 8][4] = {};
    warp_product<kQueryStep / 8, kHeadDim>(st, k, SmemMatrix<Element, true>{q_tile, kStride}, lane);
    warp_product<kQueryStep / 8, kHeadDim>(dpt, v, SmemMatrix<Element, true>{dout_tile, kStride},
                                           lane);
#pragma unroll
    for (int n = 0; n < kQueryStep / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[n][e] *= args.scale;
    const uint32_t keep = args.dropout.active ? keep_bits_key_major<kQueryStep / 8>(
                                                    args.dropout, head, geo, key0, i0, lane)
                                              : 0u;
    key_major_gradients(st, dpt, lse_step, delta_step, args.dropout, keep, geo, key0, i0, lane);
    warp_product_from_accumulators<kHeadDim / 8, kQueryStep>(
        dv, st, SmemMatrix<Element, false>{dout_tile, kStride}, lane, staging);
    warp_product_from_accumulators<kHeadDim / 8, kQueryStep>(
        dk, dpt, SmemMatrix<Element, false>{q_tile, kStride}, lane, staging);
  }
  const float dk_scale[2] = {args.scale, args.scale}, dv_scale[2] = {1.f, 1.f};
  store_rows(args.dk + head.dkv, geo.dkv_row, dk, dk_scale, key0, geo.Tk, args.accumulate, geo,
             lane);
  store_rows(args.dv + head.dkv, geo.dkv_row, dv, dv_scale, key0, geo.Tk, args.accumulate, geo,
             lane);
}

// One dQ step, elementwise: dp := dS = P (dP F - Delta) for the warp's queries row0 + row and
// the tile's keys j0 + column, s holding scale Q K^T (and dp already dP F); 0 where masked or
// query >= T.
template <int kN8>
__device__ void query_major_gradients(const float (&s)[kN8][4], float (&dp)[kN8][4],
                                      const float (&lse)[2], const float (&delta)[2],
                                      const Geometry& geo, int row0, int j0, int lane) {
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = row0 + g + 8 * (e / 2), j = j0 + 8 * n + t2 + e % 2;
      const float p = !masked(geo, i, j) && i < geo.T ? expf(s[n][e] - lse[e / 2]) : 0.f;
      const bool lone_key = geo.q_position + i == 0;
      dp[n][e] = lone_key ? 0.f : p * (dp[n][e] - delta[e / 2]);
    }
  }
}

// dQ of one CTA's 64 queries (blockIdx.y, the last first) of one sample and head (blockIdx.x),
// over the key tiles up to the diagonal.
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
  const Head head = head_of(geo, blockIdx.x);
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
  const SmemMatrix<Element, true> q{q_tile + warp * kWarpRows * kStride, kStride};
  const SmemMatrix<Element, true> dout{dout_tile + warp * kWarpRows * kStride, kStride};
  float dq[kHeadDim / 8][4] = {};
  const int key_end = min(i0 + kBlockRows + geo.shift, geo.Tk);  // keys the block's queries see
  for (int j0 = 0; j0 < key_end; j0 += kKeyTile) {
    __syncthreads();  // every warp is done with the previous K and V
    load_tile<Element, kKeyTile, kHeadDim>(k_tile, args.k + head.kv, geo.kv_row, j0, geo.Tk, geo);
    load_tile<Element, kKeyTile, kHeadDim>(v_tile, args.v + head.kv, geo.kv_row, j0, geo.Tk, geo);
    __syncthreads();
    // The tile's keys all follow the warp's queries.
    if (j0 > row0 + kWarpRows - 1 + geo.shift) continue;
    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
    warp_product<kKeyTile / 8, kHeadDim>(s, q, SmemMatrix<Element, true>{k_tile, kStride}, lane);
    warp_product<kKeyTile / 8, kHeadDim>(dp, dout, SmemMatrix<Element, true>{v_tile, kStride},
                                         lane);
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] *= args.scale;
    if (args.dropout.active) {
      const uint32_t keep =
          keep_bits_query_major<kKeyTile / 8>(args.dropout, head, geo, row0, j0, lane);
      apply_keep_bits(dp, args.dropout, keep);
    }
    query_major_gradients(s, dp, lse, delta, geo, row0, j0, lane);
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
  if (d.head_dim < 1 || d.head_dim > kMaxHeadDim)
    unsupported(TRAINER_STR("head_dim " << d.head_dim << " is outside 1.." << kMaxHeadDim
                                        << " (hidden_size / num_attention_heads)"));
  if (!(d.dropout_prob >= 0.f && d.dropout_prob < 1.f))
    unsupported(TRAINER_STR("dropout probability " << d.dropout_prob << " is outside [0, 1)"));
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

// Where q, k, v and their gradients live: element strides of a row and of a (sample, head).
struct Layout {
  int64_t q_row, q_head, kv_row, kv_head, dq_row, dq_head, dkv_row, dkv_head;
};

// The whole sequence: q, k, v (and dq, dk, dv) side by side in qkv (and dqkv).
Layout whole_sequence_layout(const cpu::FlashAttentionDims& d) {
  const int64_t row = d.micro_batch * d.heads * 3 * d.head_dim, head = 3 * d.head_dim;
  return Layout{row, head, row, head, row, head, row, head};
}

// A block: q in qkv, k and v in kv, dq alone, dk and dv in dkv.
Layout block_layout(const cpu::FlashAttentionDims& d) {
  const int64_t heads = d.micro_batch * d.heads, D = d.head_dim;
  return Layout{heads * 3 * D, 3 * D, heads * 2 * D, 2 * D, heads * D, D, heads * 2 * D, 2 * D};
}

// `operands` are the tensors tiles are loaded from (whole 16-byte chunks of them when they
// allow); d checked.
template <class Element>
Geometry make_geometry(const cpu::FlashAttentionDims& d, const Layout& layout,
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
  geo.shift = static_cast<int>(d.q_position - d.kv_position);
  geo.q_position = d.q_position;
  geo.q_row = layout.q_row;
  geo.q_head = layout.q_head;
  geo.kv_row = layout.kv_row;
  geo.kv_head = layout.kv_head;
  geo.dq_row = layout.dq_row;
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

// One CTA per (sample and head, block of 64 of `rows` rows).
dim3 row_block_grid(const cpu::FlashAttentionDims& d, int64_t rows) {
  return dim3(static_cast<unsigned>(d.micro_batch * d.heads),
              static_cast<unsigned>((rows + kBlockRows - 1) / kBlockRows));
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
    kernel<<<row_block_grid(dims, dims.seq_len), kFlashThreads, kBytes, stream>>>(
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
    dkdv<<<row_block_grid(dims, dims.kv_len), kFlashThreads, kKeyValueBytes, stream>>>(args);
    TRAINER_CUDA_CHECK(cudaGetLastError());
    dq<<<row_block_grid(dims, dims.seq_len), kFlashThreads, kQueryBytes, stream>>>(args);
    TRAINER_CUDA_CHECK(cudaGetLastError());
  });
}

template <class Element>
void whole_forward(Element* ctx, float* lse, const Element* qkv,
                   const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  const cpu::FlashAttentionDims d = whole_sequence_dims(dims);
  const Geometry geo = make_geometry<Element>(d, whole_sequence_layout(d), {qkv});
  launch_forward(ctx, lse, ForwardInputs<Element>{qkv, qkv + d.head_dim, qkv + 2 * d.head_dim}, geo,
                 d, stream);
}

template <class Element>
void whole_backward(Element* dqkv, const Element* dctx, const Element* qkv, const Element* ctx,
                    const float* lse, const cpu::FlashAttentionDims& dims, void* scratch,
                    cudaStream_t stream) {
  const cpu::FlashAttentionDims d = whole_sequence_dims(dims);
  const int64_t D = d.head_dim;
  const BackwardArgs<Element, Element> args{
      dqkv,         dqkv + D,
      dqkv + 2 * D, dctx,
      qkv,          qkv + D,
      qkv + 2 * D,  lse,
      nullptr,      make_geometry<Element>(d, whole_sequence_layout(d), {qkv, dctx}),
      d.scale,      make_dropout(d),
      false};
  launch_backward(args, ctx, d, scratch, stream);
}

template <class Element>
void block_forward(float* ctx, float* lse, const Element* qkv, const Element* kv,
                   const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  const cpu::FlashAttentionDims d = checked_dims(dims);
  const Geometry geo = make_geometry<Element>(d, block_layout(d), {qkv, kv});
  launch_forward(ctx, lse, ForwardInputs<Element>{qkv, kv, kv + d.head_dim}, geo, d, stream);
}

template <class Element>
void block_backward(float* dq, float* dkv, const Element* dctx, const Element* qkv,
                    const Element* kv, const Element* ctx, const float* lse,
                    const cpu::FlashAttentionDims& dims, void* scratch, cudaStream_t stream) {
  const cpu::FlashAttentionDims d = checked_dims(dims);
  const int64_t D = d.head_dim;
  const BackwardArgs<Element, float> args{
      dq,      dkv,
      dkv + D, dctx,
      qkv,     kv,
      kv + D,  lse,
      nullptr, make_geometry<Element>(d, block_layout(d), {qkv, kv, dctx}),
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
                             const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  whole_forward(ctx, lse, qkv, dims, stream);
}
void flash_attention_forward(__nv_bfloat16* ctx, float* lse, const __nv_bfloat16* qkv,
                             const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  whole_forward(ctx, lse, qkv, dims, stream);
}

void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const cpu::FlashAttentionDims& dims, void* scratch,
                              cudaStream_t stream) {
  whole_backward(dqkv, dctx, qkv, ctx, lse, dims, scratch, stream);
}
void flash_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dctx,
                              const __nv_bfloat16* qkv, const __nv_bfloat16* ctx, const float* lse,
                              const cpu::FlashAttentionDims& dims, void* scratch,
                              cudaStream_t stream) {
  whole_backward(dqkv, dctx, qkv, ctx, lse, dims, scratch, stream);
}

void flash_block_forward(float* ctx, float* lse, const float* qkv, const float* kv,
                         const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  block_forward(ctx, lse, qkv, kv, dims, stream);
}
void flash_block_forward(float* ctx, float* lse, const __nv_bfloat16* qkv, const __nv_bfloat16* kv,
                         const cpu::FlashAttentionDims& dims, cudaStream_t stream) {
  block_forward(ctx, lse, qkv, kv, dims, stream);
}

void flash_block_backward(float* dq, float* dkv, const float* dctx, const float* qkv,
                          const float* kv, const float* ctx, const float* lse,
                          const cpu::FlashAttentionDims& dims, void* scratch, cudaStream_t stream) {
  block_backward(dq, dkv, dctx, qkv, kv, ctx, lse, dims, scratch, stream);
}
void flash_block_backward(float* dq, float* dkv, const __nv_bfloat16* dctx,
                          const __nv_bfloat16* qkv, const __nv_bfloat16* kv,
                          const __nv_bfloat16* ctx, const float* lse,
                          const cpu::FlashAttentionDims& dims, void* scratch, cudaStream_t stream) {
  block_backward(dq, dkv, dctx, qkv, kv, ctx, lse, dims, scratch, stream);
}

}  // namespace runtime::cuda
