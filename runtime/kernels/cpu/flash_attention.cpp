// FlashAttention-2 on the host (Note [Flash attention on the host]): nothing of size T x T is
// ever in memory, only tiles. Every output element is summed by one task in a fixed order, so
// results are bitwise identical for any thread count. All outputs are assigned (=).
#include "runtime/kernels/cpu/flash_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/error.h"
#include "runtime/kernels/cpu/flash_attention_tiles.h"
#include "runtime/kernels/cpu/register_tile.h"
#include "runtime/kernels/cpu/vector_math.h"

// GCC vectorises loops 256 bits wide on AVX-512 machines unless told otherwise; the loops over
// a tile's 64 query lanes run faster 512 wide (the forward by about 8% at T = 1024, D = 64).
#if defined(__AVX512F__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace runtime::cpu {
namespace flash_tiles {
namespace {

// Note [Flash attention on the host]
// Tiles are key-major: tile S^T(j, i) holds one row per key j and one column per query i,
// and the kQueryTile queries of a tile are the lanes of the vectors. The softmax state of
// the queries (running max m_i, running sum l_i of exp(s_ij - m_i)) is then one vector per
// quantity, reductions over keys are lane-wise, and no tile is ever transposed: a product
// that needs S rather than S^T reads the tile as its scalar operand through strides.
//
// Forward: one task per (sample, head, query tile), the longest tiles first. For each key
// tile up to the diagonal: S^T = scale K Q^T, -inf where key > query; m' = max(m, max_j S);
// P = exp(S - m'); l = exp(m - m') l + sum_j P; O = exp(m - m') O + (P * F) V; m = m'.
// Then ctx = O / l and lse = m + log(l). l sums the probabilities before dropout, as the
// unfused softmax normalises before the dropout kernel.
// Backward: one task per (sample, kv head), so that dQ, dK and dV are each summed by one
// thread: for each of the kv head's query heads in increasing order (one, without grouped-query
// attention), Delta_i = dO_i . O_i (which equals rowsum(dP * P) of the unfused softmax
// backward); for each key tile j, for each query tile i on or below the diagonal: P =
// exp(S - lse), 0 where masked; dP = dO V^T; dS = P * (dP * F - Delta); dV_j += (P * F)^T dO;
// dK_j += dS^T Q; dQ_i += dS K. dK and dQ are multiplied by scale once, when they are written.
// Query heads share a kv head's K and V (Note [Grouped-query attention]): the forward's tasks
// read them through the query head's kv head, and dK, dV sum the group's query heads in order.
//
// Dropout (Note [Dropout RNG]): the probability of query i and key j of local head h and
// sample b is element e = ((head_offset + h) * L + q_position + i) * L + kv_position + j of
// sample sample_offset + b (L = full_len; L = T and positions 0 for the whole sequence), as
// dropout_attention_forward addresses the (B, H, L, L) probabilities. It is kept iff
// dropout_bits >= dropout_threshold(p), and then scaled by F = 1.0f / (1.0f - p) (computed in
// float, as the dropout kernel does); F = 0 otherwise. Both directions multiply the same F:
// P * F into the context, dP * F back. A query's keys j0..j0+kKeyTile-1 in a tile are
// consecutive elements, covered by the kKeyTile / 4 + 1 Philox blocks from e0 >> 2 (e0 the
// element of key j0): key j0 + j takes word j + e0 % 4 of that run of words. Philox runs
// vectorised across the query lanes, one block per lane, and each lane picks its word by its
// own e0 % 4, which differs between queries when L % 4 != 0. The backward redraws the bits.
//
// Blocks (Note [Flash blocks]): the same tiles take queries and keys from separate tensors
// (HeadRows), key rows Tk != T, and a causal mask on global positions, key j visible to query
// i iff j <= i + shift with shift = q_position - kv_position; key tiles past the last visible
// key are skipped, and a query that sees no key keeps m = -inf, l = 0 (ctx 0, lse -inf).
//
// Sliding window (Note [Sliding window] in runtime/op_args.h): key j is also masked for query i
// when j <= i + shift - window. The forward starts at the first key tile a query of its tile
// sees, and the backward stops a key tile's query tiles after the last query that sees one of
// its keys; the tiles themselves, and the dropout coordinates, are those of the plain mask, so
// a tile computed with a window differs from the plain one only in the masked elements.
// Documents (Note [Document masking] in runtime/op_args.h) mask key j for query i when j is
// before the query's document start, and skip tiles the same way: the forward from the tile
// holding the first start of its query tile, the backward up to the last query whose start is
// at or before the key tile's last key. Starts never decrease, so in a key row of a tile the
// lanes it is hidden from are the last ones, found by a binary search.
//
// Tiles: kQueryTile = 64 lanes are four AVX-512 vectors, the width of the 6 x 4 register
// tile of the products; with kKeyTile = 64 a thread's forward tiles take under 150 KB
// (D = 128) and stay in its L2. Measured on 2 cores at T = 1024, D = 64, key tiles of 32, 96
// and 128 were slower: smaller ones waste less of the diagonal tiles (computed whole, then
// masked) but make more, shorter products.

using detail::kVectorFloats;
using detail::load_vec;
using detail::register_tile;
using detail::store_vec;
using detail::VecF;
#if defined(__AVX512F__)
constexpr int kTileVectors = 4;  // vectors per row of a register tile
#else
constexpr int kTileVectors = 2;
#endif

constexpr int kTileRows = 6;        // rows of a register tile: 6 x 4 accumulators + 4 + 1
constexpr int64_t kQueryTile = 64;  // queries per tile: the lanes of the tile's vectors
constexpr int64_t kKeyTile = 64;    // keys per tile
constexpr int64_t kMaxHeadDim = kFlashMaxHeadDim;
static_assert(kQueryTile % kVectorFloats == 0, "query tiles are whole vectors");
static_assert(kKeyTile % 4 == 0, "a key tile starts on a Philox block when T % 4 == 0");

constexpr int64_t kBlocksPerQuery = kKeyTile / 4 + 1;  // Philox blocks covering a key tile
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// C(i, n) = alpha * sum_{k < K} A(i, k) B(k, n), plus C(i, n) when accumulate, with
// A(i, k) = a[i * a_row + k * a_k], B(k, n) = b[k * ldb + n], C(i, n) = c[i * ldc + n].
// N is a multiple of kVectorFloats (operands are padded); k runs in increasing order.
using Product = detail::TileProduct;

template <int Rows>
void row_block(const Product& op, int64_t i0, int64_t N, int64_t K) {
  int64_t n0 = 0;
  for (; n0 + kTileVectors * kVectorFloats <= N; n0 += kTileVectors * kVectorFloats)
    register_tile<Rows, kTileVectors>(op, i0, n0, 0, K);
  switch ((N - n0) / kVectorFloats) {
    case 3:
      return register_tile<Rows, 3>(op, i0, n0, 0, K);
    case 2:
      return register_tile<Rows, 2>(op, i0, n0, 0, K);
    case 1:
      return register_tile<Rows, 1>(op, i0, n0, 0, K);
    default:
      return;
  }
}

// C(M, N) as Product says.
void product(const Product& op, int64_t M, int64_t N, int64_t K) {
  int64_t i0 = 0;
  for (; i0 + kTileRows <= M; i0 += kTileRows) row_block<kTileRows>(op, i0, N, K);
  switch (M - i0) {
    case 5:
      return row_block<5>(op, i0, N, K);
    case 4:
      return row_block<4>(op, i0, N, K);
    case 3:
      return row_block<3>(op, i0, N, K);
    case 2:
      return row_block<2>(op, i0, N, K);
    case 1:
      return row_block<1>(op, i0, N, K);
    default:
      return;
  }
}
static_assert(kTileRows == 6, "product dispatches on 1..6 rows");

// Where one (sample, head) lives in the [s, b, h] tensors and in the dropout coordinates.
struct Head {
  const float* q;          // query row 0; row t at q + t * Geometry::q_row
  const float* k;          // key row 0; row j at k + j * Geometry::k_row
  const float* v;          // value row 0; row j at v + j * Geometry::v_row
  int64_t ctx_offset;      // of position 0 in ctx and dctx
  int64_t lse_offset;      // of position 0 in lse
  uint64_t first_element;  // dropout element of (query 0, key 0): ((head_offset + h) * L +
                           // q_position) * L + kv_position
  uint64_t sample;         // global sample index
  const int32_t* starts;   // its document starts: query i's at starts[i * Geometry::starts_row];
                           // null for one document
};

struct Geometry {
  int64_t T;           // query rows
  int64_t Tk;          // key rows
  int64_t D;           // head dim
  int64_t padded_dim;  // D rounded up to whole vectors
  int64_t shift;       // q_position - kv_position: key j is visible to query i iff j <= i + shift
  int64_t window;      // and, when > 0, j > i + shift - window (Note [Sliding window])
  int64_t full_len;    // L: the dropout coordinates' row length
  int64_t q_row, k_row, v_row;  // floats between rows t and t + 1 of q, k and v
  int64_t ctx_row;              // of ctx: B * H * D
  int64_t kv_position;          // global position of key row 0
  int64_t starts_row;           // of the document starts: B
};

Geometry make_geometry(const Operands& in) {
  const FlashAttentionDims& dims = in.dims;
  return Geometry{dims.seq_len,
                  dims.kv_len,
                  dims.head_dim,
                  round_up(dims.head_dim, kVectorFloats),
                  dims.q_position - dims.kv_position,
                  dims.window,
                  dims.full_len,
                  in.q.row_stride,
                  in.k.row_stride,
                  in.v.row_stride,
                  dims.micro_batch * dims.heads * dims.head_dim,
                  dims.kv_position,
                  dims.micro_batch};
}

// Query head bh (= b * H + h) and its kv head bh / group_size.
Head make_head(const Operands& in, int64_t bh) {
  const FlashAttentionDims& dims = in.dims;
  const int64_t b = bh / dims.heads, h = bh % dims.heads, kv_head = bh / dims.group_size;
  const uint64_t L = static_cast<uint64_t>(dims.full_len);
  const uint64_t global_head = static_cast<uint64_t>(dims.head_offset + h);
  return Head{in.q.head(bh),
              in.k.head(kv_head),
              in.v.head(kv_head),
              bh * dims.head_dim,
              bh * dims.seq_len,
              (global_head * L + static_cast<uint64_t>(dims.q_position)) * L +
                  static_cast<uint64_t>(dims.kv_position),
              static_cast<uint64_t>(dims.sample_offset + b),
              in.document_starts == nullptr ? nullptr : in.document_starts + b};
}

// The dropout rule of one call; F = keep_scale where kept (Note [Flash attention on the host]).
struct Dropout {
  bool active;         // p > 0
  uint32_t threshold;  // keep iff bits >= threshold
  float keep_scale;    // 1.0f / (1.0f - p)
  DropoutKey key;
};

Dropout make_dropout(const FlashAttentionDims& dims) {
  return Dropout{dims.dropout_prob > 0.f, dropout_threshold(dims.dropout_prob),
                 1.0f / (1.0f - dims.dropout_prob), dims.dropout_key};
}

typedef uint32_t VecU32 __attribute__((vector_size(kVectorFloats * sizeof(uint32_t))));
typedef uint64_t VecU64 __attribute__((vector_size(kVectorFloats * sizeof(uint32_t))));
typedef int32_t VecI32 __attribute__((vector_size(kVectorFloats * sizeof(uint32_t))));

// Per 64-bit lane, (low 32 bits of a) * multiplier (a multiplier below 2^32).
inline VecU64 widening_multiply(VecU64 a, uint64_t multiplier) {
#if defined(__AVX512F__)
  return std::bit_cast<VecU64>(_mm512_maskz_mul_epu32(0xFF, std::bit_cast<__m512i>(a),
                                                      _mm512_set1_epi64(int64_t(multiplier))));
#elif defined(__AVX2__)
  return std::bit_cast<VecU64>(
      _mm256_mul_epu32(std::bit_cast<__m256i>(a), _mm256_set1_epi64x(int64_t(multiplier))));
#else
  return (a & 0xFFFFFFFFull) * multiplier;
#endif
}

// philox_mulhilo per 32-bit lane: the high and low words of a * multiplier, from two widening
// multiplies, of the even and of the odd lanes.
inline void mulhilo(VecU32 a, uint64_t multiplier, VecU32& hi, VecU32& lo) {
  constexpr uint64_t kLow = 0xFFFFFFFFull;
  const VecU64 wide = std::bit_cast<VecU64>(a);
  const VecU64 even = widening_multiply(wide, multiplier);
  const VecU64 odd = widening_multiply(wide >> 32, multiplier);
  hi = std::bit_cast<VecU32>((even >> 32) | (odd & ~kLow));
  lo = std::bit_cast<VecU32>((even & kLow) | (odd << 32));
}

// words[w] = word w % 4 of Philox block (high, low) + w / 4 in each lane, for
// w < 4 * kBlocksPerQuery: the rounds of philox4x32_10, one block per lane.
void philox_lanes(VecU32 (&words)[4 * kBlocksPerQuery], VecU32 low, VecU32 high, uint64_t sample,
                  DropoutKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int64_t block = 0; block < kBlocksPerQuery; ++block) {
    VecU32 c0 = low + static_cast<uint32_t>(block);
    VecU32 c1 = high - std::bit_cast<VecU32>(c0 < low);  // a carry compares as all ones (-1)
    VecU32 c2 = VecU32{} + static_cast<uint32_t>(sample);
    VecU32 c3 = VecU32{} + static_cast<uint32_t>(sample >> 32);
    uint32_t key0 = key.key0, key1 = key.key1;
    for (int round = 0; round < 10; ++round) {
      VecU32 hi0, lo0, hi1, lo1;
      mulhilo(c0, kMul0, hi0, lo0);
      mulhilo(c2, kMul1, hi1, lo1);
      c0 = hi1 ^ c1 ^ key0;
      c2 = hi0 ^ c3 ^ key1;
      c1 = lo1;
      c3 = lo0;
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    words[4 * block] = c0;
    words[4 * block + 1] = c1;
    words[4 * block + 2] = c2;
    words[4 * block + 3] = c3;
  }
}

// Calls apply(j, i, factors) for the keys j0 + j, j < keys, and each vector of query lanes
// i0 + i .. i0 + i + kVectorFloats - 1 of a tile, with factors the lanes' dropout factors F
// (lanes past T get values that nobody reads). L: the dropout coordinates' row length.
template <class Apply>
void for_dropout_factors(const Dropout& dropout, const Head& head, int64_t L, int64_t i0,
                         int64_t j0, int64_t keys, Apply apply) {
  const VecF keep = VecF{} + dropout.keep_scale;
  for (int64_t i = 0; i < kQueryTile; i += kVectorFloats) {
    VecU32 low, high;
    VecI32 shift;  // e0 % 4 of each lane
    for (int l = 0; l < kVectorFloats; ++l) {
      const uint64_t first = head.first_element + static_cast<uint64_t>((i0 + i + l) * L + j0);
      low[l] = static_cast<uint32_t>(first >> 2);
      high[l] = static_cast<uint32_t>(first >> 34);
      shift[l] = static_cast<int32_t>(first & 3);
    }
    VecU32 words[4 * kBlocksPerQuery];
    philox_lanes(words, low, high, head.sample, dropout.key);
    for (int64_t j = 0; j < keys; ++j) {  // key j takes word j + shift
      const VecU32 low_pair = shift == 0 ? words[j] : words[j + 1];
      const VecU32 high_pair = shift == 2 ? words[j + 2] : words[j + 3];
      const VecU32 bits = shift < 2 ? low_pair : high_pair;
      apply(j, i, bits >= dropout.threshold ? keep : VecF{});
    }
  }
}

// Key row j of a tile is masked for the lanes i < first_visible_lane(j): key j0 + j is after
// query i0 + i there (j0 + j > i0 + i + shift). Clamped to [0, kQueryTile].
inline int64_t first_visible_lane(const Geometry& g, int64_t i0, int64_t j0, int64_t j) {
  return std::clamp<int64_t>(j0 + j - i0 - g.shift, 0, kQueryTile);
}

// Key row j of a tile is left of the window of the lanes i >= window_end_lane(j): key j0 + j is
// at or before query i0 + i + shift - window there. kQueryTile without a window.
inline int64_t window_end_lane(const Geometry& g, int64_t i0, int64_t j0, int64_t j) {
  if (g.window == 0) return kQueryTile;
  return std::clamp<int64_t>(j0 + j - i0 - g.shift + g.window, 0, kQueryTile);
}

// The first key row query i sees by its document: its document's start as a key row (0 or less
// with one document).
inline int64_t document_first_key(const Head& head, const Geometry& g, int64_t i) {
  return head.starts == nullptr ? 0 : head.starts[i * g.starts_row] - g.kv_position;
}

// The first of the queries [first, end) whose document starts after key row `key` (end if
// none): every later query's does too.
inline int64_t first_query_past(const Head& head, const Geometry& g, int64_t first, int64_t end,
                                int64_t key) {
  if (head.starts == nullptr) return end;
  while (first < end) {
    const int64_t middle = first + (end - first) / 2;
    if (document_first_key(head, g, middle) > key) {
      end = middle;
    } else {
      first = middle + 1;
    }
  }
  return first;
}

// Key row j of a tile is before the document of the lanes i >= document_end_lane(j), among the
// tile's `queries` lanes; kQueryTile with one document or when it is before none.
inline int64_t document_end_lane(const Head& head, const Geometry& g, int64_t i0, int64_t queries,
                                 int64_t j0, int64_t j) {
  const int64_t end = first_query_past(head, g, i0, i0 + queries, j0 + j) - i0;
  return end == queries ? kQueryTile : end;
}

// The lanes [0, end) of key row j of a tile are not masked on the left (by a window or a
// document).
inline int64_t left_mask_lane(const Head& head, const Geometry& g, int64_t i0, int64_t queries,
                              int64_t j0, int64_t j) {
  return std::min(window_end_lane(g, i0, j0, j), document_end_lane(head, g, i0, queries, j0, j));
}

// The keys [0, visible_keys) are visible to some of the queries [0, queries_end).
inline int64_t visible_keys(const Geometry& g, int64_t queries_end) {
  return std::clamp<int64_t>(queries_end + g.shift, 0, g.Tk);
}

// The first key tile (a multiple of kKeyTile) that holds a key query `first_query` or a later
// one sees: 0 without a window or documents.
inline int64_t first_key_tile(const Head& head, const Geometry& g, int64_t first_query) {
  int64_t first_key = document_first_key(head, g, first_query);
  if (g.window > 0) first_key = std::max(first_key, first_query + g.shift - g.window + 1);
  return std::clamp<int64_t>(first_key, 0, g.Tk) / kKeyTile * kKeyTile;
}

// The queries [0, seeing_queries) include every query that sees one of the keys [0, keys_end):
// the query rows T without a window or documents.
inline int64_t seeing_queries(const Head& head, const Geometry& g, int64_t keys_end) {
  int64_t end = first_query_past(head, g, 0, g.T, keys_end - 1);
  if (g.window > 0) end = std::min(end, keys_end - 1 - g.shift + g.window);
  return std::clamp<int64_t>(end, 0, g.T);
}

// One thread's tiles for the forward; rows and lanes past T hold values nobody reads.
struct ForwardScratch {
  std::vector<float> queries_t;  // (D, kQueryTile): the tile's queries transposed, 0 past T
  std::vector<float> scores;     // (kKeyTile, kQueryTile): S^T, then P^T, then (P * F)^T
  std::vector<float> keys;       // (kKeyTile, D): K rows of the key tile
  std::vector<float> values;     // (kKeyTile, padded_dim): V rows, zero past D
  std::vector<float> out;        // (kQueryTile, padded_dim): O before the division by l
  float max[kQueryTile];         // m: running max of the scaled scores
  float sum[kQueryTile];         // l: running sum of exp(s - m)
  float rescale[kQueryTile];     // exp(m_old - m) of the current key tile

  explicit ForwardScratch(const Geometry& g)
      : queries_t(static_cast<size_t>(g.D * kQueryTile)),
        scores(static_cast<size_t>(kKeyTile * kQueryTile)),
        keys(static_cast<size_t>(kKeyTile * g.D)),
        values(static_cast<size_t>(kKeyTile * g.padded_dim)),
        out(static_cast<size_t>(kQueryTile * g.padded_dim)) {}
};

// Online softmax over one key tile of S^T (keys rows): updates m and l, turns the scores
// into P = exp(S - m) (0 where masked) and sets rescale = exp(m_old - m). A lane that has seen
// only masked keys keeps m = -inf and l = 0 (it subtracts 0 in place of m).
void online_softmax(ForwardScratch& s, int64_t keys) {
  float new_max[kQueryTile], tile_sum[kQueryTile] = {};
  std::copy(s.max, s.max + kQueryTile, new_max);
  std::copy(s.max, s.max + kQueryTile, s.rescale);  // m_old until it becomes exp(m_old - m)
  for (int64_t j = 0; j < keys; ++j) {
    const float* row = s.scores.data() + j * kQueryTile;
#pragma omp simd
    for (int64_t i = 0; i < kQueryTile; ++i) new_max[i] = std::max(new_max[i], row[i]);
  }
#pragma omp simd
  for (int64_t i = 0; i < kQueryTile; ++i) {
    s.max[i] = new_max[i];
    if (new_max[i] == kMinusInf) new_max[i] = 0.f;               // every key so far masked
    s.rescale[i] = detail::exp_poly(s.rescale[i] - new_max[i]);  // m_old = -inf gives 0
  }
  for (int64_t j = 0; j < keys; ++j) {
    float* row = s.scores.data() + j * kQueryTile;
#pragma omp simd
    for (int64_t i = 0; i < kQueryTile; ++i) {
      row[i] = detail::exp_poly(row[i] - new_max[i]);  // masked -inf gives 0
      tile_sum[i] += row[i];
    }
  }
#pragma omp simd
  for (int64_t i = 0; i < kQueryTile; ++i) s.sum[i] = s.sum[i] * s.rescale[i] + tile_sum[i];
}

// Folds keys [j0, j0 + keys) into the state of the query tile at i0.
void forward_key_tile(ForwardScratch& s, const Head& head, const Geometry& g,
                      const FlashAttentionDims& dims, const Dropout& dropout, int64_t i0,
                      int64_t queries, int64_t j0) {
  const int64_t keys = std::min(kKeyTile, g.Tk - j0), Dp = g.padded_dim;
  const size_t row_bytes = static_cast<size_t>(g.D) * sizeof(float);
  for (int64_t j = 0; j < keys; ++j) {
    std::memcpy(s.keys.data() + j * g.D, head.k + (j0 + j) * g.k_row, row_bytes);
    std::memcpy(s.values.data() + j * Dp, head.v + (j0 + j) * g.v_row, row_bytes);
  }
  product(Product{s.keys.data(), g.D, 1, s.queries_t.data(), kQueryTile, s.scores.data(),
                  kQueryTile, dims.scale, false},
          keys, kQueryTile, g.D);
  for (int64_t j = 0; j < keys; ++j) {  // causal mask: -inf where key j0 + j > query i0 + i
    float* row = s.scores.data() + j * kQueryTile;  // or is left of its window or document
    std::fill(row, row + first_visible_lane(g, i0, j0, j), kMinusInf);
    std::fill(row + left_mask_lane(head, g, i0, queries, j0, j), row + kQueryTile, kMinusInf);
  }
  online_softmax(s, keys);
  for (int64_t i = 0; i < queries; ++i) {
    float* o = s.out.data() + i * Dp;
    const float r = s.rescale[i];
#pragma omp simd
    for (int64_t d = 0; d < Dp; ++d) o[d] *= r;
  }
  if (dropout.active) {
    for_dropout_factors(dropout, head, g.full_len, i0, j0, keys, [&](int64_t j, int64_t i, VecF f) {
      float* p = s.scores.data() + j * kQueryTile + i;
      store_vec(p, load_vec(p) * f);
    });
  }
  // O(i, d) += sum_j P(j, i) V(j, d): the tile read as A through strides.
  product(Product{s.scores.data(), 1, kQueryTile, s.values.data(), Dp, s.out.data(), Dp, 1.f, true},
          queries, Dp, keys);
}

// The queries [i0, i0 + kQueryTile) of one head: ctx and lse rows (0 and -inf for a query
// that sees no key).
void forward_query_tile(ForwardScratch& s, float* ctx, float* lse, const Head& head,
                        const Geometry& g, const FlashAttentionDims& dims, const Dropout& dropout,
                        int64_t i0) {
  const int64_t queries = std::min(kQueryTile, g.T - i0), Dp = g.padded_dim;
  std::fill(s.queries_t.begin(), s.queries_t.end(), 0.f);
  for (int64_t i = 0; i < queries; ++i) {
    const float* q = head.q + (i0 + i) * g.q_row;
    for (int64_t d = 0; d < g.D; ++d) s.queries_t[d * kQueryTile + i] = q[d];
  }
  std::fill(s.out.begin(), s.out.end(), 0.f);
  std::fill(s.max, s.max + kQueryTile, kMinusInf);
  std::fill(s.sum, s.sum + kQueryTile, 0.f);
  for (int64_t j0 = first_key_tile(head, g, i0); j0 < visible_keys(g, i0 + queries); j0 += kKeyTile)
    forward_key_tile(s, head, g, dims, dropout, i0, queries, j0);
  for (int64_t i = 0; i < queries; ++i) {
    const float inv_sum = s.sum[i] > 0.f ? 1.f / s.sum[i] : 0.f;
    const float* o = s.out.data() + i * Dp;
    float* c = ctx + head.ctx_offset + (i0 + i) * g.ctx_row;
    for (int64_t d = 0; d < g.D; ++d) c[d] = o[d] * inv_sum;
    lse[head.lse_offset + i0 + i] = s.max[i] + std::log(s.sum[i]);
  }
}

// One thread's copies of one kv head and one of its query heads for the backward (padded_T,
// padded_Tk: the query and key rows rounded up to whole query and key tiles; rows and columns
// past them and D are zero) and its tiles.
struct BackwardScratch {
  std::vector<float> queries_t;  // (padded_T / kQueryTile, D, kQueryTile): q^T by query tiles
  std::vector<float> dout_t;     // (padded_T / kQueryTile, D, kQueryTile): dO^T by query tiles
  std::vector<float> queries;    // (padded_T, padded_dim): q
  std::vector<float> dout;       // (padded_T, padded_dim): dO
  std::vector<float> keys;       // (padded_Tk, padded_dim): k
  std::vector<float> dqueries;   // (padded_T, padded_dim): dQ / scale, summed over key tiles
  std::vector<float> delta;      // (padded_T): Delta = dO . O
  std::vector<float> probs;      // (kKeyTile, kQueryTile): P^T, then (P * F)^T
  std::vector<float> dprobs;     // (kKeyTile, kQueryTile): dP^T, then dS^T
  std::vector<float> dkeys;      // (padded_Tk, padded_dim): dK / scale, summed over query heads
  std::vector<float> dvalues;    // (padded_Tk, padded_dim): dV, summed over query heads

  explicit BackwardScratch(const Geometry& g) {
    const int64_t tile = std::max(kQueryTile, kKeyTile);
    const int64_t padded_T = round_up(g.T, tile), padded_Tk = round_up(g.Tk, tile);
    const auto size = [](int64_t rows, int64_t cols) { return static_cast<size_t>(rows * cols); };
    queries_t.resize(size(g.D, padded_T));
    dout_t.resize(size(g.D, padded_T));
    for (auto* v : {&queries, &dout, &dqueries}) v->resize(size(padded_T, g.padded_dim));
    for (auto* v : {&keys, &dkeys, &dvalues}) v->resize(size(padded_Tk, g.padded_dim));
    delta.resize(size(padded_T, 1));
    for (auto* v : {&probs, &dprobs}) v->resize(size(kKeyTile, kQueryTile));
  }
};

// Copies q and dO of one query head into the scratch (padding stays zero), computes Delta and
// clears dQ.
void load_queries(BackwardScratch& s, const float* dctx, const float* ctx, const Head& head,
                  const Geometry& g) {
  const int64_t Dp = g.padded_dim;
  const size_t row_bytes = static_cast<size_t>(g.D) * sizeof(float);
  for (int64_t t = 0; t < g.T; ++t) {
    const float* q = head.q + t * g.q_row;
    const float* dout = dctx + head.ctx_offset + t * g.ctx_row;
    const float* out = ctx + head.ctx_offset + t * g.ctx_row;
    std::memcpy(s.queries.data() + t * Dp, q, row_bytes);
    std::memcpy(s.dout.data() + t * Dp, dout, row_bytes);
    double dot = 0.0;
    const int64_t transposed = t / kQueryTile * g.D * kQueryTile + t % kQueryTile;
    for (int64_t d = 0; d < g.D; ++d) {
      s.queries_t[transposed + d * kQueryTile] = q[d];
      s.dout_t[transposed + d * kQueryTile] = dout[d];
      dot += double{dout[d]} * double{out[d]};
    }
    s.delta[t] = static_cast<float>(dot);
  }
  std::fill(s.dqueries.begin(), s.dqueries.end(), 0.f);
}

// Copies k of one kv head into the scratch and clears dK and dV.
void load_keys(BackwardScratch& s, const Head& head, const Geometry& g) {
  const int64_t Dp = g.padded_dim;
  const size_t row_bytes = static_cast<size_t>(g.D) * sizeof(float);
  for (int64_t j = 0; j < g.Tk; ++j)
    std::memcpy(s.keys.data() + j * Dp, head.k + j * g.k_row, row_bytes);
  std::fill(s.dkeys.begin(), s.dkeys.end(), 0.f);
  std::fill(s.dvalues.begin(), s.dvalues.end(), 0.f);
}

// P^T = exp(S^T - lse) on the visible keys of each lane, 0 where masked or query >= T.
void recompute_probs(BackwardScratch& s, const float* lse, const Head& head, const Geometry& g,
                     int64_t i0, int64_t queries, int64_t j0, int64_t keys) {
  for (int64_t j = 0; j < keys; ++j) {
    float* row = s.probs.data() + j * kQueryTile;
    const int64_t end = std::min(left_mask_lane(head, g, i0, queries, j0, j), queries);
    const int64_t first = std::min(first_visible_lane(g, i0, j0, j), end);
    std::fill(row, row + first, 0.f);
#pragma omp simd
    for (int64_t i = first; i < end; ++i) row[i] = detail::exp_poly(row[i] - lse[i0 + i]);
    std::fill(row + end, row + kQueryTile, 0.f);
  }
}

// The pair (key tile at j0, query tile at i0): adds into dK, dV of the key tile and dQ.
void backward_tile(BackwardScratch& s, const float* lse, const Head& head, const Geometry& g,
                   const FlashAttentionDims& dims, const Dropout& dropout, int64_t i0, int64_t j0) {
  const int64_t keys = std::min(kKeyTile, g.Tk - j0), queries = std::min(kQueryTile, g.T - i0);
  const int64_t Dp = g.padded_dim;
  float* P = s.probs.data();
  float* dP = s.dprobs.data();
  // S^T = scale K Q^T, then P; dP^T = V dO^T.
  product(Product{s.keys.data() + j0 * Dp, Dp, 1, s.queries_t.data() + i0 * g.D, kQueryTile, P,
                  kQueryTile, dims.scale, false},
          keys, kQueryTile, g.D);
  recompute_probs(s, lse + head.lse_offset, head, g, i0, queries, j0, keys);
  product(Product{head.v + j0 * g.v_row, g.v_row, 1, s.dout_t.data() + i0 * g.D, kQueryTile, dP,
                  kQueryTile, 1.f, false},
          keys, kQueryTile, g.D);
  const float* delta = s.delta.data() + i0;
  if (dropout.active) {
    for_dropout_factors(dropout, head, g.full_len, i0, j0, keys, [&](int64_t j, int64_t i, VecF f) {
      float* p = P + j * kQueryTile + i;
      float* dp = dP + j * kQueryTile + i;
      const VecF probs = load_vec(p);
      store_vec(dp, probs * (load_vec(dp) * f - load_vec(delta + i)));
      store_vec(p, probs * f);
    });
  } else {
    for (int64_t j = 0; j < keys; ++j) {
      const int64_t row = j * kQueryTile;
#pragma omp simd
      for (int64_t i = 0; i < kQueryTile; ++i) dP[row + i] = P[row + i] * (dP[row + i] - delta[i]);
    }
  }
  // dV += (P F)^T dO, dK += dS^T Q (tiles read as A by rows), dQ += dS K (tile read through
  // strides).
  product(Product{P, kQueryTile, 1, s.dout.data() + i0 * Dp, Dp, s.dvalues.data() + j0 * Dp, Dp,
                  1.f, true},
          keys, Dp, queries);
  product(Product{dP, kQueryTile, 1, s.queries.data() + i0 * Dp, Dp, s.dkeys.data() + j0 * Dp, Dp,
                  1.f, true},
          keys, Dp, queries);
  product(Product{dP, 1, kQueryTile, s.keys.data() + j0 * Dp, Dp, s.dqueries.data() + i0 * Dp, Dp,
                  1.f, true},
          queries, Dp, keys);
}

// dst = (or +=) scale * src over D floats.
void write_gradient(float* dst, const float* src, float scale, int64_t D, bool accumulate) {
  if (accumulate) {
    for (int64_t d = 0; d < D; ++d) dst[d] += scale * src[d];
  } else {
    for (int64_t d = 0; d < D; ++d) dst[d] = scale * src[d];
  }
}

// dq of each query head of kv head `kv_head` and the kv head's dk, dv: the query heads in
// increasing order, and for each the key tiles in order, each over the query tiles from the
// first that sees it on.
void backward_kv_head(BackwardScratch& s, const Gradients& out, const float* dctx, const float* ctx,
                      const float* lse, const Operands& in, int64_t kv_head, const Geometry& g,
                      const Dropout& dropout) {
  const int64_t r = in.dims.group_size, Dp = g.padded_dim;
  const float scale = in.dims.scale;
  load_keys(s, make_head(in, kv_head * r), g);
  for (int64_t bh = kv_head * r; bh < (kv_head + 1) * r; ++bh) {
    const Head head = make_head(in, bh);
    load_queries(s, dctx, ctx, head, g);
    for (int64_t j0 = 0; j0 < g.Tk; j0 += kKeyTile) {
      const int64_t first_query = std::max<int64_t>(0, j0 - g.shift);  // the first to see j0
      const int64_t query_end = seeing_queries(head, g, std::min(j0 + kKeyTile, g.Tk));
      for (int64_t i0 = first_query / kQueryTile * kQueryTile; i0 < query_end; i0 += kQueryTile)
        backward_tile(s, lse, head, g, in.dims, dropout, i0, j0);
    }
    for (int64_t t = 0; t < g.T; ++t) {
      float* dq = out.dq.head(bh) + t * out.dq.row_stride;
      write_gradient(dq, s.dqueries.data() + t * Dp, scale, g.D, out.accumulate);
    }
  }
  for (int64_t j = 0; j < g.Tk; ++j) {
    float* dk = out.dk.head(kv_head) + j * out.dk.row_stride;
    float* dv = out.dv.head(kv_head) + j * out.dv.row_stride;
    write_gradient(dk, s.dkeys.data() + j * Dp, scale, g.D, out.accumulate);
    write_gradient(dv, s.dvalues.data() + j * Dp, 1.f, g.D, out.accumulate);
  }
}

}  // namespace

FlashAttentionDims resolve(const FlashAttentionDims& dims) {
  FlashAttentionDims r = dims;
  if (r.kv_len == 0) r.kv_len = r.seq_len;
  if (r.full_len == 0) r.full_len = r.seq_len;
  TRAINER_ASSERT(r.seq_len >= 1 && r.kv_len >= 1 && r.micro_batch >= 1 && r.heads >= 1,
                 "flash attention needs seq_len, kv_len, micro_batch and heads >= 1; got "
                     << r.seq_len << ", " << r.kv_len << ", " << r.micro_batch << ", " << r.heads);
  TRAINER_ASSERT(r.group_size >= 1 && r.heads % r.group_size == 0,
                 "flash attention group_size " << r.group_size << " must divide heads " << r.heads);
  TRAINER_ASSERT(r.head_dim >= 1 && r.head_dim <= kMaxHeadDim,
                 "flash attention head_dim " << r.head_dim << " outside 1.." << kMaxHeadDim);
  TRAINER_ASSERT(r.window >= 0, "flash attention window " << r.window << " is negative");
  TRAINER_ASSERT(r.dropout_prob >= 0.f && r.dropout_prob < 1.f,
                 "dropout probability " << r.dropout_prob << " outside [0, 1)");
  TRAINER_ASSERT(
      r.head_offset >= 0 && r.sample_offset >= 0,
      "negative head_offset " << r.head_offset << " or sample_offset " << r.sample_offset);
  TRAINER_ASSERT(r.q_position >= 0 && r.kv_position >= 0 &&
                     r.q_position + r.seq_len <= r.full_len &&
                     r.kv_position + r.kv_len <= r.full_len,
                 "flash attention blocks: queries ["
                     << r.q_position << ", " << r.q_position + r.seq_len << ") and keys ["
                     << r.kv_position << ", " << r.kv_position + r.kv_len
                     << ") must lie in [0, full_len " << r.full_len << ")");
  return r;
}

void forward(float* ctx, float* lse, const Operands& in) {
  const Geometry g = make_geometry(in);
  const Dropout dropout = make_dropout(in.dims);
  const int64_t query_tiles = (g.T + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = in.dims.micro_batch * in.dims.heads * query_tiles;
#pragma omp parallel
  {
    ForwardScratch scratch(g);
    // Task t: head t / query_tiles, query tiles from the last (the most keys) to the first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t i0 = (query_tiles - 1 - t % query_tiles) * kQueryTile;
      forward_query_tile(scratch, ctx, lse, make_head(in, t / query_tiles), g, in.dims, dropout,
                         i0);
    }
  }
}

void backward(const Gradients& out, const float* dctx, const float* ctx, const float* lse,
              const Operands& in) {
  const Geometry g = make_geometry(in);
  const Dropout dropout = make_dropout(in.dims);
  const int64_t kv_heads = in.dims.micro_batch * in.dims.heads / in.dims.group_size;
#pragma omp parallel
  {
    BackwardScratch scratch(g);
#pragma omp for schedule(dynamic, 1)
    for (int64_t kv_head = 0; kv_head < kv_heads; ++kv_head)
      backward_kv_head(scratch, out, dctx, ctx, lse, in, kv_head, g, dropout);
  }
}

}  // namespace flash_tiles

namespace {

// The whole-sequence dims, resolved: no block.
FlashAttentionDims whole_sequence(const FlashAttentionDims& dims) {
  TRAINER_ASSERT((dims.kv_len == 0 || dims.kv_len == dims.seq_len) && dims.q_position == 0 &&
                     dims.kv_position == 0 && (dims.full_len == 0 || dims.full_len == dims.seq_len),
                 "flash_attention over the whole sequence takes no block (kv_len "
                     << dims.kv_len << ", q_position " << dims.q_position << ", kv_position "
                     << dims.kv_position << ", full_len " << dims.full_len
                     << "): use the flash block kernels");
  return flash_tiles::resolve(dims);
}

// The whole-sequence operands: q, k, v of each group side by side in qkv (T, B, G*(r+2)*D).
flash_tiles::Operands whole_sequence_operands(const float* qkv, const FlashAttentionDims& d,
                                              const int32_t* document_starts) {
  using flash_tiles::QkvPart;
  return {d, flash_tiles::qkv_rows(qkv, d, QkvPart::q), flash_tiles::qkv_rows(qkv, d, QkvPart::k),
          flash_tiles::qkv_rows(qkv, d, QkvPart::v), document_starts};
}

}  // namespace

void flash_attention_forward(float* ctx, float* lse, const float* qkv,
                             const FlashAttentionDims& dims, const int32_t* document_starts) {
  flash_tiles::forward(ctx, lse,
                       whole_sequence_operands(qkv, whole_sequence(dims), document_starts));
}

void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const FlashAttentionDims& dims,
                              const int32_t* document_starts) {
  using flash_tiles::QkvPart;
  const FlashAttentionDims d = whole_sequence(dims);
  const flash_tiles::Gradients out{flash_tiles::qkv_rows(dqkv, d, QkvPart::q),
                                   flash_tiles::qkv_rows(dqkv, d, QkvPart::k),
                                   flash_tiles::qkv_rows(dqkv, d, QkvPart::v), false};
  flash_tiles::backward(out, dctx, ctx, lse, whole_sequence_operands(qkv, d, document_starts));
}

}  // namespace runtime::cpu
