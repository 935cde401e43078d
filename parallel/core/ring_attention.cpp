// Ring attention (Note [Ring attention] in ring_attention.h): the block schedule, the merge and
// the point-to-point traffic; the flash blocks themselves are runtime operators.
#include "parallel/core/ring_attention.h"

#include <memory>

#include "runtime/error.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"

namespace parallel {
namespace {

namespace ops = runtime::ops;
using runtime::DType;
using runtime::MemoryCategory;

constexpr int kKeyValueTag = 1;
constexpr int kGradientTag = 2;

// The shapes every step shares: rows of a chunk, and the widths of the query-head tensors and
// of the packed key/value blocks (kv heads only, Note [Grouped-query attention]).
struct Ring {
  const runtime::FlashAttentionDims& dims;
  const ContextShard& shard;
  const Tensor& document_starts;  // of the local rows, or empty
  int64_t chunk() const { return shard.chunk(); }
  int64_t next() const { return (shard.rank + 1) % shard.size; }
  int64_t previous() const { return (shard.rank + shard.size - 1) % shard.size; }
  // The block of rank r - step.
  int64_t holder(int64_t step) const { return (shard.rank - step + shard.size) % shard.size; }
  int64_t kv_heads() const {
    TRAINER_ASSERT(
        dims.group_size >= 1 && dims.heads % dims.group_size == 0,
        "ring attention: group_size " << dims.group_size << " must divide heads " << dims.heads);
    return dims.heads / dims.group_size;
  }
  // (count, B, H*D): ctx, dq.
  runtime::Shape query_rows(int64_t count) const {
    return {count, dims.micro_batch, dims.heads * dims.head_dim};
  }
  // (count, B, G*2*D): kv, dkv.
  runtime::Shape key_value_rows(int64_t count) const {
    return {count, dims.micro_batch, kv_heads() * 2 * dims.head_dim};
  }
  // The flash block of local query chunk `q` against chunk `k` of the block's holder.
  runtime::FlashAttentionDims block(int64_t q, int64_t holder, int64_t k) const {
    runtime::FlashAttentionDims b = dims;
    b.seq_len = b.kv_len = chunk();
    b.q_position = shard.chunk_position(shard.rank, q);
    b.kv_position = shard.chunk_position(holder, k);
    b.full_len = shard.seq;
    return b;
  }
  // Whether key chunk k of `holder` has any key a query of local chunk q sees: one at or before
  // it and, with a sliding window, fewer than `window` positions before it.
  bool visible(int64_t q, int64_t holder, int64_t k) const {
    const int64_t key = shard.chunk_position(holder, k),
                  query = shard.chunk_position(shard.rank, q);
    const int64_t nearest = query - (key + chunk() - 1);  // the least query - key of the pair
    return key <= query && (dims.window == 0 || nearest < dims.window);
  }
  // The document starts of local chunk q's rows, or empty.
  Tensor starts_of(int64_t q) const {
    return runtime::optional_rows(document_starts, q * chunk(), chunk());
  }
  // Chunk q's (B, H, chunk) block of a (2, B, H, chunk) log-sum-exp.
  Tensor lse_chunk(const Tensor& lse, int64_t q) const {
    const int64_t n = dims.micro_batch * dims.heads * chunk();
    return lse.view(q * n, {dims.micro_batch, dims.heads, chunk()});
  }
};

// A workspace temporary; `name`: the tensor's in a memory timeline.
Tensor workspace(runtime::Allocator& allocator, const char* name, const runtime::Shape& shape,
                 DType dtype) {
  const runtime::memory_timeline::Name timeline_name(name);
  return Tensor::empty(allocator, shape, dtype, MemoryCategory::workspace);
}

// The local rows' keys and values, packed (Tl, B, G*2*D).
Tensor pack_key_values(const Ring& ring, const Tensor& qkv, runtime::Allocator& allocator) {
  const int64_t rows = 2 * ring.chunk();
  Tensor kv = workspace(allocator, "ring_kv", ring.key_value_rows(rows), qkv.dtype());
  ops::pack_kv({.kv = kv,
                .qkv = qkv,
                .rows = rows,
                .micro_batch = ring.dims.micro_batch,
                .heads = ring.dims.heads,
                .head_dim = ring.dims.head_dim,
                .group_size = ring.dims.group_size});
  return kv;
}

// The forward blocks of one step against the key/value block `kv` of `holder`: each visible
// pair into its query chunk's running (ctx, lse), the first one written, later ones merged.
struct ForwardState {
  Tensor ctx;        // (Tl, B, H*D) f32: running output of both chunks
  Tensor block_ctx;  // (chunk, B, H*D) f32
  Tensor block_lse;  // (B, H, chunk) f32
  bool started[2] = {false, false};
};

void forward_step(const Ring& ring, ForwardState& state, const RingAttentionForward& args,
                  const Tensor& kv, int64_t holder) {
  const int64_t c = ring.chunk();
  for (int64_t q = 0; q < 2; ++q) {
    for (int64_t k = 0; k < 2; ++k) {
      if (!ring.visible(q, holder, k)) continue;
      const Tensor ctx = state.ctx.rows(q * c, c), lse = ring.lse_chunk(args.lse, q);
      const bool first = !state.started[q];
      state.started[q] = true;
      ops::flash_block_forward({.ctx = first ? ctx : state.block_ctx,
                                .lse = first ? lse : state.block_lse,
                                .qkv = args.qkv.rows(q * c, c),
                                .kv = kv.rows(k * c, c),
                                .dims = ring.block(q, holder, k),
                                .document_starts = ring.starts_of(q)});
      if (first) continue;
      ops::flash_merge({.ctx = ctx,
                        .lse = lse,
                        .ctx_block = state.block_ctx,
                        .lse_block = state.block_lse,
                        .rows = c,
                        .micro_batch = ring.dims.micro_batch,
                        .heads = ring.dims.heads,
                        .head_dim = ring.dims.head_dim});
    }
  }
}

// The backward blocks of one step: dq of the local queries and the gradient `dkv` of the
// block of `holder` (+=).
void backward_step(const Ring& ring, const RingAttentionBackward& args, const Tensor& dq,
                   const Tensor& kv, const Tensor& dkv, int64_t holder) {
  const int64_t c = ring.chunk();
  for (int64_t q = 0; q < 2; ++q) {
    for (int64_t k = 0; k < 2; ++k) {
      if (!ring.visible(q, holder, k)) continue;
      ops::flash_block_backward({.dq = dq.rows(q * c, c),
                                 .dkv = dkv.rows(k * c, c),
                                 .dctx = args.dctx.rows(q * c, c),
                                 .qkv = args.qkv.rows(q * c, c),
                                 .kv = kv.rows(k * c, c),
                                 .ctx = args.ctx.rows(q * c, c),
                                 .lse = ring.lse_chunk(args.lse, q),
                                 .dims = ring.block(q, holder, k),
                                 .document_starts = ring.starts_of(q)});
    }
  }
}

}  // namespace

void ring_attention_forward(Communicator& cp, const RingAttentionForward& args,
                            runtime::Allocator& allocator) {
  const Ring ring{args.dims, args.shard, args.document_starts};
  const int64_t c = ring.chunk(), steps = args.shard.size;
  ForwardState state{workspace(allocator, "ring_ctx", ring.query_rows(2 * c), DType::f32),
                     workspace(allocator, "ring_block_ctx", ring.query_rows(c), DType::f32),
                     workspace(allocator, "ring_block_lse",
                               {args.dims.micro_batch, args.dims.heads, c}, DType::f32)};
  Tensor kv = pack_key_values(ring, args.qkv, allocator);
  for (int64_t step = 0; step < steps; ++step) {
    const bool last = step + 1 == steps;
    std::unique_ptr<Request> sent;
    if (!last) sent = cp.send_async(kv, static_cast<int>(ring.next()), kKeyValueTag);
    forward_step(ring, state, args, kv, ring.holder(step));
    if (last) break;
    Tensor next = workspace(allocator, "ring_next_kv", kv.shape(), kv.dtype());
    cp.recv(next, static_cast<int>(ring.previous()), kKeyValueTag);
    sent->wait();
    kv = next;
  }
  ops::convert(args.ctx, state.ctx);
}

void ring_attention_backward(Communicator& cp, const RingAttentionBackward& args,
                             runtime::Allocator& allocator) {
  const Ring ring{args.dims, args.shard, args.document_starts};
  const int64_t c = ring.chunk(), steps = args.shard.size;
  const Tensor dq = workspace(allocator, "ring_dq", ring.query_rows(2 * c), DType::f32);
  ops::zero(dq);
  Tensor kv = pack_key_values(ring, args.qkv, allocator);
  Tensor dkv = workspace(allocator, "ring_dkv", ring.key_value_rows(2 * c), DType::f32);
  ops::zero(dkv);
  for (int64_t step = 0; step < steps; ++step) {
    const bool last = step + 1 == steps;
    std::unique_ptr<Request> kv_sent;
    if (!last) kv_sent = cp.send_async(kv, static_cast<int>(ring.next()), kKeyValueTag);
    backward_step(ring, args, dq, kv, dkv, ring.holder(step));
    // The block's gradient goes on with it; after the last step it reaches its owner.
    std::unique_ptr<Request> dkv_sent =
        cp.send_async(dkv, static_cast<int>(ring.next()), kGradientTag);
    if (!last) {
      Tensor next = workspace(allocator, "ring_next_kv", kv.shape(), kv.dtype());
      cp.recv(next, static_cast<int>(ring.previous()), kKeyValueTag);
      kv_sent->wait();
      kv = next;
    }
    Tensor next_dkv = workspace(allocator, "ring_next_dkv", dkv.shape(), DType::f32);
    cp.recv(next_dkv, static_cast<int>(ring.previous()), kGradientTag);
    dkv_sent->wait();
    dkv = next_dkv;
  }
  kv = Tensor();
  ops::assemble_qkv_grad({.dqkv = args.dqkv,
                          .dq = dq,
                          .dkv = dkv,
                          .rows = 2 * c,
                          .micro_batch = args.dims.micro_batch,
                          .heads = args.dims.heads,
                          .head_dim = args.dims.head_dim,
                          .group_size = args.dims.group_size});
}

}  // namespace parallel
