// Ring attention over the context-parallel group (Note [Ring attention]): causal flash
// attention of this rank's two sequence chunks against every chunk of the sequence, with the
// key/value blocks passed around the ring while the current block is computed.
#pragma once

#include "parallel/core/communicator.h"
#include "parallel/core/context_shard.h"
#include "runtime/op_args.h"

namespace parallel {

using runtime::Tensor;

// Note [Ring attention]
// Rank r of a ring of N holds query chunks r and 2N-1-r (Note [Context chunks]) and starts
// with the keys and values of the same two chunks (packed from qkv, k and v only). In N steps
// the key/value blocks go around the ring (rank r sends to r + 1 and receives from r - 1), so
// at step s rank r holds the block of rank r - s. For each (query chunk, key chunk) pair the
// rank runs one flash block (runtime/op_args.h FlashBlockForward) unless the key chunk lies
// wholly after the query chunk (causally masked, skipped): at step 0 three pairs (two of them
// diagonal), at every later step two fully visible ones, so every rank computes the same
// work. The block outputs of a query chunk are merged in f32 through their log-sum-exp in
// ring order, which fixes the summation order: a recompute reruns the same sums.
// The next block's send is posted before the current block is computed and its receive
// comes after: on NCCL the channel streams carry it while the block kernels run; over MPI it
// moves when the receiver posts its receive.
// Backward runs the ring again in the same direction: with the key/value block of rank r - s
// travels the f32 gradient of that block, to which each rank adds the contribution of its
// own queries; after N hops (the last one back to the owner) every block's gradient is
// complete at its owner. dq is summed locally in f32. Payload per layer and microbatch:
// forward (N - 1) key/value blocks; backward (N - 1) key/value blocks and N gradient blocks. A
// block holds the kv heads only (Note [Grouped-query attention] in runtime/op_args.h): with
// group_size r, 1/r of the bytes of a block of every query head.

struct RingAttentionForward {
  Tensor ctx;  // (Tl, B, H*D) activation dtype =: the attention output of the local rows
  Tensor lse;  // (2, B, H, Tl / 2) f32 =: the merged log-sum-exp of local chunk 0, then 1
  Tensor qkv;  // (Tl, B, G*(r+2)*D) activation dtype: this rank's rows (G = H / r kv heads)
  // seq_len = Tl (the local rows); heads, head_dim, group_size, the head and sample offsets,
  // scale and dropout as for flash_attention_forward; the positions are set per block here.
  runtime::FlashAttentionDims dims;
  ContextShard shard;
  Tensor document_starts = {};  // (Tl, B) i32 of the local rows, or empty (Note [Document masking])
};

struct RingAttentionBackward {
  Tensor dqkv;  // (Tl, B, G*(r+2)*D) activation dtype =
  Tensor dctx;  // (Tl, B, H*D)
  Tensor qkv;   // the forward's
  Tensor ctx;   // the forward's output
  Tensor lse;   // the forward's merged log-sum-exp
  runtime::FlashAttentionDims dims;
  ContextShard shard;
  Tensor document_starts = {};  // the forward's
};

// Collective over `cp` (every rank of the ring calls it for the same layer and microbatch).
// Temporaries come from `allocator` in category workspace.
void ring_attention_forward(Communicator& cp, const RingAttentionForward& args,
                            runtime::Allocator& allocator);
void ring_attention_backward(Communicator& cp, const RingAttentionBackward& args,
                             runtime::Allocator& allocator);

}  // namespace parallel
