// The building blocks of the device flash attention kernels (flash_attention.cu): the tile
// geometry, shared-memory layout, warp products in the accumulator layout, and the masking,
// softmax and dropout on it (Note [Flash attention on CUDA]).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/philox.h"

namespace runtime::cuda::device::flash {

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
// -inf where key > query or key < the query's first key (in tiles that cross the diagonal or a
// first key: First keys below), then the CPU's online softmax (running max m, running sum l, O
// rescaled), P * F (dropout) and O += (P F) V, with P F read from the accumulators as the MMA's
// A operand (rounded to bf16 first, as FlashAttention-2 does; the f32 path stages it through
// shared memory). ctx = O / l, lse = m + log l.
// Backward: Delta = rowsum(dO * O), a warp per row. dK/dV: a CTA per (sample and kv head, 64
// keys), each warp 16 keys, over the kv head's query heads in increasing order (Note
// [Grouped-query attention] in runtime/op_args.h; one without it) and for each over query
// steps of 32 from the diagonal on: S^T = scale K Q^T,
// P^T = exp(S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T F - Delta), dV += (P^T F) dO and
// dK += dS^T Q, P^T F and dS^T read from the accumulators: key-major tiles need no transpose.
// dQ: a CTA per (sample and head, 64 queries), over key tiles of 64 up to the diagonal: S, P,
// dP, dS as above, dQ += dS K. dK and dQ are multiplied by scale when written. The dK/dV steps
// hold 32 queries so that dK, dV (64 + 64 accumulators at head_dim 128) and two 16 x 32 tiles
// fit a lane's registers. Query 0 sees one key (so does every query with a window of 1, or at
// its document's start: a query whose first key is its own), so its softmax is the constant 1
// and its dS is exactly 0: the kernels write that 0 ("lone key", lone_key) rather than the
// rounding noise of dP F - Delta, two equal sums taken in different orders (the host, summing
// in yet other orders, often cancels them exactly, and the op twins demand a 0 wherever the
// host has one).
//
// Dropout. Element (query i, key j) of local head h and sample b is element
// ((head_offset + h) L + q_position + i) L + kv_position + j of global sample sample_offset + b
// (L = full_len; T and 0 for the whole sequence; Note [Dropout RNG]), drawn
// where its tile is computed, into a keep bit per element of the lane (32 bits cover a lane's
// 16 x 64 tile) by a loop that is not unrolled, so one Philox body is live at a time and the
// unrolled tile code only tests bits; the forward draws a tile's bits before computing S, so
// that the Philox rounds do not share the registers with S and O. The forward and dQ draw a
// lane's two consecutive keys from one Philox block (two when they straddle blocks); dK/dV,
// whose lanes hold consecutive queries, draws each element alone. Kept iff bits >= threshold,
// then scaled by keep_scale = 1.0f / (1.0f - p); the host computes both as the CPU twin does.
// Masked elements and queries past T draw nothing, but for a masked key whose pair partner is
// visible (the key before a query's first key: its bits are those of its coordinates, and its
// P is 0).
//
// Blocks (Note [Flash blocks]). The same kernels run a query block of qkv against a key block of
// kv: Geometry holds where q, k, v and their gradients live, the key rows Tk, and shift =
// q_position - kv_position, so key j is masked for query i iff j > i + shift or j >= Tk. The
// forward writes f32 ctx; the backward adds (+=) into f32 dq and dkv, each element by its one
// writer as before. Key tiles past the last visible key are not loaded; the dK/dV steps start
// at the first query that sees the CTA's first key. The lone key is that of global query 0 (of
// every query with a window of 1, and of a query at its document's start).
//
// Sliding window (Note [Sliding window] in runtime/op_args.h). Geometry's window W > 0 also
// masks key j for query i when j <= i + shift - W; a window of full_len or more masks nothing
// and runs as W = 0.
//
// Documents (Note [Document masking] in runtime/op_args.h). Geometry's document_starts, (T, B),
// also masks key j for query i when kv_position + j is before the start of i's document; null
// is one document, which masks nothing.
//
// First keys. Both cut a query's keys on the left: query i sees the keys from its first key on
// (first_visible_key, a local key row: the later of i + shift - W + 1 and start - kv_position;
// that of global position 0 with neither), masked() masks those before it, and the query is
// lone when its own key is its first. Windows and starts never decrease along a sample's
// queries, so neither do first keys, and the first query of a block or a step has the least:
// the forward and dQ start at the key tile of their first query's first key, a warp skips a key
// tile (dQ) or a query step (dK/dV) whose keys all lie before its first query's, and the dK/dV
// steps end at the first step whose first query's first key is past the CTA's last key (a
// binary search over the steps, once per CTA). A tile that crosses a first key of a lane's
// queries is masked element by element; tiles and dropout coordinates are those of the plain
// causal mask, whatever the window and documents.
//
// Determinism. Every output element belongs to one lane of one CTA and is summed in a fixed
// order (k steps, then tiles, then query heads, then a fixed butterfly over the 4 lanes of a
// row); dK/dV and dQ are separate kernels, so nothing is summed across CTAs and there are no
// atomics.

constexpr int kWarps = 4;
constexpr int kFlashThreads = kWarps * kWarpThreads;  // 128
constexpr int kWarpRows = 16;                         // M of mma.m16n8k16
constexpr int kBlockRows = kWarps * kWarpRows;        // queries (forward, dQ) or keys (dK/dV)
constexpr int kKeyTile = 64;                          // keys per step of the forward and dQ
constexpr int kQueryStep = 32;                        // queries per step of dK/dV
constexpr int kMaxHeadDim = static_cast<int>(::runtime::cpu::kFlashMaxHeadDim);
constexpr int64_t kMaxBlocksY = 65535;  // gridDim.y: row blocks of one head
constexpr int64_t kMaxBlocksZ = 65535;  // gridDim.z: query heads of one kv head
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kDeltaThreads = 256;  // the Delta kernel: a warp per row

// ---- shapes and coordinates ----

// Sizes and coordinates of one call, as the kernels take them. Query head bh = b * H + h is
// member bh % group of kv head bh / group (Note [Grouped-query attention]). Queries and their
// gradient live in rows of q_row elements, (bh / group) * q_group + (bh % group) * q_head from
// row 0; keys, values and theirs in rows of kv_row, kv_head apart per kv head (qkv itself for
// the whole sequence; qkv and kv for a block, whose gradients dq and dkv have their own
// strides).
struct Geometry {
  int T;                              // query rows (seq_len)
  int Tk;                             // key rows (kv_len)
  int D;                              // head_dim
  int H;                              // local query heads
  int group;                          // query heads per kv head (group_size)
  int shift;                          // q_position - kv_position: key j is visible to query i
                                      // iff j <= i + shift (0 for the whole sequence)
  int window;                         // and, when > 0, j > i + shift - window (Note [Sliding
                                      // window] in runtime/op_args.h)
  int64_t q_position;                 // global position of query 0 (kv_position + shift)
  const int32_t* document_starts;     // (T, B): the global position of the start of query i's
                                      // document in local sample b at [i * B + b] (Note
                                      // [Document masking]); null: one document
  int B;                              // local samples
  int64_t q_row, q_group, q_head;     // of q (in qkv)
  int64_t kv_row, kv_head;            // of k and v
  int64_t dq_row, dq_group, dq_head;  // of dq
  int64_t dkv_row, dkv_head;          // of dk and dv
  int64_t ctx_row;                    // of ctx and dctx: B*H*D
  int64_t head_offset;                // global index of local head 0
  int64_t sample_offset;              // global index of local sample 0
  uint64_t full_len;                  // L: the dropout coordinates' row length
  uint64_t first_position;            // q_position * L + kv_position
  bool vector_loads;                  // tiles load 16 bytes at a time (D and the operands allow it)
};

// The dropout of one call (Note [Dropout RNG]); the host computes threshold and keep_scale.
struct DropoutRule {
  bool active;         // p > 0
  uint32_t threshold;  // kept iff bits >= threshold
  float keep_scale;    // 1.0f / (1.0f - p)
  DropoutKey key;
};

// One (sample, query head): where it lives in the tensors and in the dropout coordinates.
struct Head {
  int64_t q;               // its row 0 in q
  int64_t kv;              // its kv head's in k and v
  int64_t dq;              // in dq
  int64_t dkv;             // its kv head's in dk and dv
  int64_t ctx;             // position 0 in ctx and dctx
  int64_t rows;            // position 0 in lse and Delta: (b * H + h) * T
  uint64_t first_element;  // dropout element of (query 0, key 0): ((head_offset + h) * L +
                           // q_position) * L + kv_position
  uint64_t sample;         // global sample index
  const int32_t* starts;   // its sample's document starts (query i's at [i * B]), or null
};

// Query head `member` of kv head `kv_head` (of sample b = bh / H: query head bh = kv_head *
// group + member).
__device__ inline Head head_of(const Geometry& geo, int kv_head, int member) {
  const int bh = kv_head * geo.group + member, b = bh / geo.H, h = bh % geo.H;
  Head head;
  head.q = int64_t{kv_head} * geo.q_group + int64_t{member} * geo.q_head;
  head.kv = int64_t{kv_head} * geo.kv_head;
  head.dq = int64_t{kv_head} * geo.dq_group + int64_t{member} * geo.dq_head;
  head.dkv = int64_t{kv_head} * geo.dkv_head;
  head.ctx = int64_t{bh} * geo.D;
  head.rows = int64_t{bh} * geo.T;
  head.first_element =
      static_cast<uint64_t>(geo.head_offset + h) * geo.full_len * geo.full_len + geo.first_position;
  head.sample = static_cast<uint64_t>(geo.sample_offset + b);
  head.starts = geo.document_starts != nullptr ? geo.document_starts + b : nullptr;
  return head;
}

// The first key query i sees, as a local key row (First keys in the note above): the later of
// its window's first and its document's start; global position 0's with neither, and for a
// query past T. It may lie before or past the keys of a block.
__device__ __forceinline__ int first_visible_key(const Geometry& geo, const Head& head, int i) {
  const int kv_position = static_cast<int>(geo.q_position) - geo.shift;
  const int start = head.starts != nullptr && i < geo.T ? head.starts[int64_t{i} * geo.B] : 0;
  return geo.window > 0 ? max(start - kv_position, i + geo.shift - geo.window + 1)
                        : start - kv_position;
}

// Key j is masked for query i (both local rows; first_key: first_visible_key(i)): after it,
// past the key rows, or before its first key.
__device__ __forceinline__ bool masked(const Geometry& geo, int i, int j, int first_key) {
  return j > i + geo.shift || j >= geo.Tk || j < first_key;
}

// Query i's softmax has one key, its own (the lone key: Note [Flash attention on CUDA]).
__device__ __forceinline__ bool lone_key(const Geometry& geo, int i, int first_key) {
  return first_key == i + geo.shift;
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
  static constexpr size_t kFirstKey = kDelta + kQueryStep * sizeof(float);  // kQueryStep ints
  static constexpr size_t kStaging = kFirstKey + kQueryStep * sizeof(int);
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
__device__ inline void load_tile(Element* tile, const Element* src, int64_t row_elements, int row0,
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
// (whose first keys are row_first_key) are consecutive elements, drawn from one Philox block
// (two when they straddle blocks), unless both are masked (the first alone can be, before the
// query's first key).
template <int kN8>
__device__ inline uint32_t keep_bits_query_major(const DropoutRule& rule, const Head& head,
                                                 const Geometry& geo, int row0, int j0,
                                                 const int (&row_first_key)[2], int lane) {
  static_assert(4 * kN8 <= 32, "a bit per element of the lane");
  const int g = lane / 4, t2 = lane % 4 * 2;
  uint32_t keep = 0;
#pragma unroll 1
  for (int pair = 0; pair < 2 * kN8; ++pair) {  // pair 2n + r: bits 4n + 2r and 4n + 2r + 1
    const int n = pair / 2, r = pair % 2;
    const int i = row0 + g + 8 * r, j = j0 + 8 * n + t2;
    const int first_key = r == 0 ? row_first_key[0] : row_first_key[1];  // no runtime index
    if (i >= geo.T || (masked(geo, i, j, first_key) && masked(geo, i, j + 1, first_key))) continue;
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
// i0 + 8n + t2 + e % 2 (whose first key is step_first_key[i - i0]); consecutive elements belong
// to different queries, so each is drawn alone.
template <int kN8>
__device__ inline uint32_t keep_bits_key_major(const DropoutRule& rule, const Head& head,
                                               const Geometry& geo, int key0, int i0,
                                               const int* step_first_key, int lane) {
  static_assert(4 * kN8 <= 32, "a bit per element of the lane");
  const int g = lane / 4, t2 = lane % 4 * 2;
  uint32_t keep = 0;
#pragma unroll 1
  for (int bit = 0; bit < 4 * kN8; ++bit) {
    const int n = bit / 4, e = bit % 4;
    const int j = key0 + g + 8 * (e / 2), i = i0 + 8 * n + t2 + e % 2;
    if (i >= geo.T || masked(geo, i, j, step_first_key[i - i0])) continue;
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
__device__ inline void apply_keep_bits(float (&x)[kN8][4], const DropoutRule& rule, uint32_t keep) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[n][e] *= keep_factor(rule, keep, 4 * n + e);
}

// s := scale * s, and -inf where key j0 + column is masked for query row0 + row, when the tile
// crosses the warp's diagonal, the end of the keys or a first key of the lane's queries
// (row_first_key, as keep_bits_query_major's).
template <int kN8>
__device__ inline void scale_and_mask(float (&s)[kN8][4], float scale, const Geometry& geo,
                                      int row0, int j0, const int (&row_first_key)[2], int lane) {
  const bool crosses = j0 + 8 * kN8 - 1 > row0 + geo.shift || j0 + 8 * kN8 > geo.Tk ||
                       j0 < max(row_first_key[0], row_first_key[1]);
  const int g = lane / 4, t2 = lane % 4 * 2;
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = row0 + g + 8 * (e / 2), j = j0 + 8 * n + t2 + e % 2;
      s[n][e] = crosses && masked(geo, i, j, row_first_key[e / 2]) ? -INFINITY : scale * s[n][e];
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
__device__ inline void online_softmax(float (&s)[kN8][4], SoftmaxState& state,
                                      float (&rescale)[2]) {
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
__device__ inline void store_rows(Out* out, int64_t row_elements, const float (&x)[kN8][4],
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

}  // namespace runtime::cuda::device::flash
