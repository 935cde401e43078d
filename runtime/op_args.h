// The argument struct of each compute operator of runtime/ops.h: its tensors (outputs, then
// inputs, then weights), then its sizes, then its scalars, each named. Required fields have no
// default, so a designated initialiser that leaves one out warns (-Wmissing-field-initializers);
// optional tensors default to an undefined Tensor. Shapes are row-major; `=` fields are
// assigned, `+=` fields accumulate. Semantics: the CPU kernel of the same name.
#pragma once

#include <cstdint>

#include "runtime/op_types.h"
#include "runtime/philox.h"
#include "runtime/rotary.h"
#include "runtime/tensor.h"

namespace runtime::ops {

// Note [Activation layouts]
// Hidden states are [s, b, h]: (seq, micro_batch, channels), with `seq` possibly a sequence
// shard starting at global position seq_offset. Per-head tensors are (micro_batch, heads, seq,
// head_dim); batch_heads = micro_batch * heads. Attention scores and probabilities are
// (batch_heads, seq, seq), causal: row i attends to columns j <= i.

// Note [Grouped-query attention]
// H query heads share G = H / r key/value heads, r = group_size (r = 1: multi-head attention;
// r = H: multi-query attention). The fused qkv activations are grouped by kv head: group g
// holds [q heads g*r .. g*r+r-1 (r*D features) | k_g (D) | v_g (D)], so a position has
// G * (r + 2) * D features, and r = 1 is the (head, {q, k, v}, D) layout bit for bit. Query head
// h reads kv head h / r; per-head tensors of k and v (and their gradients) hold the G kv heads
// only (batch_heads / r of them, flattened index bh / r), never copies. A kv head's gradient is
// the sum over its r query heads in increasing order, by one writer (no atomics): deterministic.
// Dropout coordinates are those of the query head (Note [Dropout RNG]).

// ---- linear layers, layernorm and RMSNorm ----

// out = input weight^T + bias.
struct LinearForward {
  Tensor out;        // (rows, out_features) =
  Tensor input;      // (rows, in_features)
  Tensor weight;     // (out_features, in_features)
  Tensor bias = {};  // (out_features), optional
  int64_t rows;
  int64_t in_features;
  int64_t out_features;
};

// dinput = dout weight, dweight += dout^T input, dbias += column sums of dout.
struct LinearBackward {
  Tensor dinput = {};  // (rows, in_features) =, optional (skipped)
  Tensor dweight;      // (out_features, in_features) +=
  Tensor dbias = {};   // (out_features) +=, optional
  Tensor dout;         // (rows, out_features)
  Tensor input;        // (rows, in_features)
  Tensor weight;       // (out_features, in_features)
  int64_t rows;
  int64_t in_features;
  int64_t out_features;
};

// Note [MLP epilogues]
// The MLP's fc1 and its GELU, and fc2's backward through that GELU, as single operators: on
// CUDA the GELU runs in a cuBLASLt GEMM's epilogue (GELU_AUX_BIAS in fc1's product, DGELU_BGRAD
// in fc2's input-gradient product; tanh GELU only, other cases and problems cuBLASLt refuses
// run the composition); on the host exactly the composition of the ops named, so host results
// equal the unfused ones bit for bit. docs/gpu.md says which of the two the layer runs, and why.

// pre_activation = input weight^T + bias, out = gelu(pre_activation): on the host exactly
// linear_forward into pre_activation, then gelu_forward into out.
struct LinearGeluForward {
  Tensor out;             // (rows, out_features) =: the GELU's output
  Tensor pre_activation;  // (rows, out_features) =: the GELU's input
  Tensor input;           // (rows, in_features)
  Tensor weight;          // (out_features, in_features)
  Tensor bias;            // (out_features)
  int64_t rows;
  int64_t in_features;
  int64_t out_features;
  GeluKind kind;
};

// The backward of a linear layer whose input is input = gelu(pre_activation), through that
// GELU: dinput = (dout weight) * gelu'(pre_activation), dweight += dout^T input, dbias +=
// column sums of dout, and pre_bias += column sums of dinput (the bias gradient of the linear
// that produced pre_activation). On the host exactly linear_backward, gelu_backward in place on
// dinput, then cpu::bias_gradient of dinput into pre_bias.
struct GeluLinearBackward {
  Tensor dinput;          // (rows, in_features) =
  Tensor dweight;         // (out_features, in_features) +=
  Tensor dbias = {};      // (out_features) +=, optional
  Tensor pre_bias;        // (in_features) +=, f32
  Tensor dout;            // (rows, out_features)
  Tensor input;           // (rows, in_features): gelu(pre_activation)
  Tensor weight;          // (out_features, in_features)
  Tensor pre_activation;  // (rows, in_features)
  int64_t rows;
  int64_t in_features;
  int64_t out_features;
  GeluKind kind;
};

// out = (input - mean) * rstd * weight + bias, row by row.
struct LayernormForward {
  Tensor out;     // (rows, channels) =
  Tensor mean;    // (rows) =, f32
  Tensor rstd;    // (rows) =, f32
  Tensor input;   // (rows, channels)
  Tensor weight;  // (channels)
  Tensor bias;    // (channels)
  int64_t rows;
  int64_t channels;
  float eps;
};

// dinput += the input gradient (the residual's gradient may be passed in), dweight and dbias
// += their sums over rows.
struct LayernormBackward {
  Tensor dinput;   // (rows, channels) +=
  Tensor dweight;  // (channels) +=
  Tensor dbias;    // (channels) +=
  Tensor dout;     // (rows, channels)
  Tensor input;    // (rows, channels)
  Tensor weight;   // (channels)
  Tensor mean;     // (rows), from the forward
  Tensor rstd;     // (rows), from the forward
  int64_t rows;
  int64_t channels;
};

// Note [RMSNorm rounding]
// Hugging Face's LlamaRMSNorm: statistics in fp32 whatever the dtype, rstd = 1 / sqrt(mean(x^2)
// + eps), out = weight * (x * rstd), the product x * rstd rounded to the activation dtype before
// the weight multiplies (`weight * hidden.to(input_dtype)`). The host computes in f32, where that
// rounding is the identity; the CUDA bf16 kernels round there, and their dweight sums dout times
// the rounded product (the exact gradient of what the forward computed), while dinput passes
// through the rounding as through the identity, as autograd's cast does.

// out = weight * (input * rstd), row by row (Note [RMSNorm rounding]).
struct RmsnormForward {
  Tensor out;     // (rows, channels) =
  Tensor rstd;    // (rows) =, f32
  Tensor input;   // (rows, channels)
  Tensor weight;  // (channels)
  int64_t rows;
  int64_t channels;
  float eps;
};

// dinput += the input gradient (the residual's gradient may be passed in, as LayernormBackward);
// dweight += its sum over rows.
struct RmsnormBackward {
  Tensor dinput;   // (rows, channels) +=
  Tensor dweight;  // (channels) +=, f32
  Tensor dout;     // (rows, channels)
  Tensor input;    // (rows, channels)
  Tensor weight;   // (channels)
  Tensor rstd;     // (rows) f32, from the forward
  int64_t rows;
  int64_t channels;
};

// ---- attention (Note [Activation layouts]) ----

// Note [Sliding window]
// With a sliding window of W keys (model.sliding_window, Hugging Face's `sliding_window`,
// Megatron's --window-size W-1,0), query i sees the keys j with i - W < j <= i: the W latest,
// itself included. W = 0 is plain causal attention (every j <= i). Positions are global: a
// block of a sharded sequence masks on q_position + i and kv_position + j. Every attention
// kernel applies the same rule (the unfused softmax, flash, the flash blocks, on the CPU and in
// CUDA), writes exact zeros where a key is masked, and skips the key tiles no query of a tile
// sees; the memory an attention takes does not change with W.

// Note [Document masking]
// With data.reset_attention_mask (Megatron's --reset-attention-mask) a sequence packs several
// documents, and a query sees only the keys of its own document. An attention kernel then
// takes document_starts, (seq, micro_batch) i32 over its query rows: the global position of
// the first token of row i's document in sample b (the position after the last end-of-document
// token before it, 0 if none). Key j is masked for query i when its global position is below
// that start, on top of the causal mask and the window (Note [Sliding window]). A query's start
// never exceeds its own position, and starts never decrease along a sample's consecutive rows;
// the kernels rely on both to skip the key tiles before a tile's first start, and the query
// tiles after the last query whose start admits a key tile. An empty tensor is one document;
// no attention buffer changes size with the documents (the trainer holds the starts themselves,
// 4 bytes per row and sample, per microbatch in flight).

// probs = causal softmax of scores (exact 0 above the diagonal and, with a window, left of
// it: Note [Sliding window]; with document starts, before them: Note [Document masking]);
// probs may alias scores.
struct CausalSoftmaxForward {
  Tensor probs;   // (batch_heads, seq, seq) =
  Tensor scores;  // (batch_heads, seq, seq)
  int64_t batch_heads;
  int64_t seq;
  int64_t window = 0;           // keys a query sees, itself included; 0: all earlier ones
  Tensor document_starts = {};  // (seq, micro_batch) i32, or empty: one document
  int64_t micro_batch = 1;      // samples in batch_heads: head bh is sample bh / (batch_heads / it)
};

// dscores = probs * (dprobs - rowsum(dprobs * probs)) where the forward saw a key, 0 elsewhere;
// dscores may alias dprobs.
struct CausalSoftmaxBackward {
  Tensor dscores;  // (batch_heads, seq, seq) =
  Tensor dprobs;   // (batch_heads, seq, seq)
  Tensor probs;    // (batch_heads, seq, seq)
  int64_t batch_heads;
  int64_t seq;
  int64_t window = 0;           // as the forward's
  Tensor document_starts = {};  // as the forward's
  int64_t micro_batch = 1;      // as the forward's
};

// qkv, grouped by kv head (Note [Grouped-query attention]; group_size 1: (heads, 3, head_dim)),
// split into per-head q and per-kv-head k, v. kv_heads = heads / group_size.
struct SplitQkvHeads {
  Tensor q;    // (micro_batch, heads, seq, head_dim) =
  Tensor k;    // (micro_batch, kv_heads, seq, head_dim) =
  Tensor v;    // (micro_batch, kv_heads, seq, head_dim) =
  Tensor qkv;  // (seq, micro_batch, kv_heads * (group_size + 2) * head_dim)
  int64_t seq;
  int64_t micro_batch;
  int64_t heads;  // query heads
  int64_t head_dim;
  int64_t group_size = 1;  // query heads per kv head
};

// The inverse of SplitQkvHeads, on gradients.
struct MergeQkvHeads {
  Tensor dqkv;  // (seq, micro_batch, kv_heads * (group_size + 2) * head_dim) =
  Tensor dq;    // (micro_batch, heads, seq, head_dim)
  Tensor dk;    // (micro_batch, kv_heads, seq, head_dim)
  Tensor dv;    // (micro_batch, kv_heads, seq, head_dim)
  int64_t seq;
  int64_t micro_batch;
  int64_t heads;  // query heads
  int64_t head_dim;
  int64_t group_size = 1;  // query heads per kv head
};

// Per-head context back to hidden states.
struct MergeHeads {
  Tensor ctx;        // (seq, micro_batch, heads * head_dim) =
  Tensor ctx_heads;  // (micro_batch, heads, seq, head_dim)
  int64_t seq;
  int64_t micro_batch;
  int64_t heads;
  int64_t head_dim;
};

// The inverse of MergeHeads.
struct SplitHeads {
  Tensor ctx_heads;  // (micro_batch, heads, seq, head_dim) =
  Tensor ctx;        // (seq, micro_batch, heads * head_dim)
  int64_t seq;
  int64_t micro_batch;
  int64_t heads;
  int64_t head_dim;
};

// The products below take batch_heads query heads; k and v (dk and dv) hold batch_heads /
// group_size kv heads, query head bh reading kv head bh / group_size (Note [Grouped-query
// attention]); dk and dv sum a kv head's query heads in increasing order.

// scores = scale * q k^T per head; entries above the diagonal may hold anything.
struct AttentionScoresForward {
  Tensor scores;  // (batch_heads, seq, seq) =
  Tensor q;       // (batch_heads, seq, head_dim)
  Tensor k;       // (batch_heads / group_size, seq, head_dim)
  int64_t batch_heads;
  int64_t seq;
  int64_t head_dim;
  float scale;
  int64_t group_size = 1;  // query heads per kv head
};

// dq = scale * dscores k, dk = scale * dscores^T q; dscores is 0 above the diagonal.
struct AttentionScoresBackward {
  Tensor dq;       // (batch_heads, seq, head_dim) =
  Tensor dk;       // (batch_heads / group_size, seq, head_dim) =
  Tensor dscores;  // (batch_heads, seq, seq)
  Tensor q;        // (batch_heads, seq, head_dim)
  Tensor k;        // (batch_heads / group_size, seq, head_dim)
  int64_t batch_heads;
  int64_t seq;
  int64_t head_dim;
  float scale;
  int64_t group_size = 1;  // query heads per kv head
};

// ctx_heads = probs v; probs causal (exactly 0 above the diagonal, not read there).
struct AttentionContextForward {
  Tensor ctx_heads;  // (batch_heads, seq, head_dim) =
  Tensor probs;      // (batch_heads, seq, seq)
  Tensor v;          // (batch_heads / group_size, seq, head_dim)
  int64_t batch_heads;
  int64_t seq;
  int64_t head_dim;
  int64_t group_size = 1;  // query heads per kv head
};

// dprobs = dctx_heads v^T on and below the diagonal; entries above it are unspecified (the
// causal softmax backward reads only j <= i; the host writes 0 there); dv = probs^T
// dctx_heads. probs causal, as above.
struct AttentionContextBackward {
  Tensor dprobs;      // (batch_heads, seq, seq) =
  Tensor dv;          // (batch_heads / group_size, seq, head_dim) =
  Tensor dctx_heads;  // (batch_heads, seq, head_dim)
  Tensor probs;       // (batch_heads, seq, seq)
  Tensor v;           // (batch_heads / group_size, seq, head_dim)
  int64_t batch_heads;
  int64_t seq;
  int64_t head_dim;
  int64_t group_size = 1;  // query heads per kv head
};

// Note [Rotary layout]
// Rotary position embedding (Hugging Face LlamaRotaryEmbedding and apply_rotary_pos_emb, the
// rotate_half convention), in place on the fused qkv activations (seq, micro_batch, width),
// whose features are grouped by key/value head: group g holds [q heads g*r .. g*r+r-1 (r *
// head_dim) | k (head_dim) | v (head_dim)], width = kv_heads * (group_size + 2) * head_dim,
// r = group_size. The q heads and the k head of every group are rotated, v is left as it is.
// Row t (for every sample) is at global position seq_offset + t. For each rotated head vector
// x of head_dim D (even; at most 512 on CUDA) and i < D/2: inv_freq_i = base^(-2i/D) in f32,
// scaled as Llama 3.1 does when `scaling` is on (Note [Rotary frequencies], runtime/rotary.h),
// angle = position * inv_freq_i in f32, c = cos(angle), s = sin(angle); x'_i = x_i c - x_{i+D/2} s,
// x'_{i+D/2} = x_{i+D/2} c + x_i s. The backward applies the inverse rotation (the transpose: angle
// -> -angle) to the gradient, in place. With document_starts (Note [Document positions]) row t
// of sample b is at position seq_offset + t - document_starts(t, b) instead.

// Note [Document positions]
// With data.reset_position_ids (Megatron's --reset-position-ids) positions restart at 0 at the
// first token of every document a sequence packs: the token at global position i of sample b
// is at position i - start, where start is its document's first position (the document_starts
// of Note [Document masking]). The learned position embedding and the rotary embedding then
// take document_starts, (seq, micro_batch) i32 over the call's rows; an empty tensor keeps
// positions running (row t at seq_offset + t). The host ops check the starts as the attention
// ops do. The position embedding's weight gradient is then a scatter-add, several rows adding
// into one position: every kernel adds them in one order, sample by sample and row by row
// within a sample, so that it is deterministic and the CPU and CUDA sums round alike.

// qkv's q and k heads rotated by their positions, in place (Note [Rotary layout]).
struct RopeForward {
  Tensor qkv;  // (seq, micro_batch, kv_heads * (group_size + 2) * head_dim), in place
  int64_t seq;
  int64_t micro_batch;
  int64_t kv_heads;
  int64_t group_size;  // query heads per key/value head (1: multi-head attention)
  int64_t head_dim;
  int64_t seq_offset;           // global position of row 0
  float base;                   // rotary base theta (10000 for Llama-2, 500000 for Llama-3)
  RopeScaling scaling{};        // Llama 3.1's frequency scaling (runtime/rotary.h); factor 0: none
  Tensor document_starts = {};  // (seq, micro_batch) i32, or empty (Note [Document positions])
};

// The gradient through RopeForward's rotation, in place: the inverse rotation of dqkv's q and k
// heads (Note [Rotary layout]).
struct RopeBackward {
  Tensor dqkv;  // same layout, in place: the gradient through the rotation
  int64_t seq;
  int64_t micro_batch;
  int64_t kv_heads;
  int64_t group_size;
  int64_t head_dim;
  int64_t seq_offset;
  float base;
  RopeScaling scaling{};
  Tensor document_starts = {};  // as the forward's
};

// Note [Query and key norms]
// model.qk_layernorm (Qwen3's q_norm and k_norm): before the rotation, every query head and every
// key head of the fused qkv activations (Note [Rotary layout]) goes through RMSNorm over its
// head_dim values (Note [RMSNorm rounding]), the query heads with one weight of head_dim, the key
// heads with another; v is left as it is. The forward keeps the heads it normalized, compact:
// per row and kv group, its group_size query heads then its key head ((group_size + 1) heads of
// head_dim), and each such head's rstd. The backward turns the gradient of the normalized heads
// into that of their inputs, in place, and adds each weight's gradient summed over its heads.

// The heads of one query and key norms call: `rows` positions (seq * micro_batch) of kv_heads
// groups, each of group_size query heads and one key head of head_dim.
struct QkNormHeads {
  int64_t rows;
  int64_t kv_heads;
  int64_t group_size;
  int64_t head_dim;
  int64_t qkv_width() const { return kv_heads * (group_size + 2) * head_dim; }
  int64_t count() const { return rows * kv_heads * (group_size + 1); }  // q and k heads
};

// qkv's q and k heads replaced by their norms, in place (Note [Query and key norms]).
struct QkNormForward {
  Tensor qkv;       // (rows, heads.qkv_width()), in place
  Tensor input;     // (heads.count(), head_dim) =: the heads before
  Tensor rstd;      // (heads.count()) =, f32, in input's head order
  Tensor q_weight;  // (head_dim)
  Tensor k_weight;  // (head_dim)
  QkNormHeads heads;
  float eps;
};

// The gradient through QkNormForward, in place on dqkv's q and k heads (=); the weights'
// gradients (+=).
struct QkNormBackward {
  Tensor dqkv;       // (rows, heads.qkv_width()), in place
  Tensor dq_weight;  // (head_dim) +=, f32
  Tensor dk_weight;  // (head_dim) +=, f32
  Tensor input;      // from the forward
  Tensor rstd;       // from the forward
  Tensor q_weight;
  Tensor k_weight;
  QkNormHeads heads;
};

// FlashAttention-2 on the fused qkv projection, causal: the fused twin of split_qkv_heads ->
// attention_scores -> causal_softmax -> dropout_attention -> attention_context -> merge_heads,
// drawing the same dropout masks (Note [Dropout RNG]); keeps only ctx (the output O) and the
// row log-sum-exp. qkv is grouped by kv head (Note [Grouped-query attention]): with r =
// dims.group_size and G = heads / r, qkv_width = G*(r+2)*head_dim (heads*3*head_dim for r = 1,
// head h's q, k, v at features [h*3*D, h*3*D + 3*D)).
struct FlashAttentionForward {
  Tensor ctx;  // (seq, micro_batch, heads*head_dim) =
  Tensor lse;  // (micro_batch, heads, seq) f32 =: log of the row's sum of exp(scaled scores)
  Tensor qkv;  // (seq, micro_batch, qkv_width)
  FlashAttentionDims dims;
  Tensor document_starts = {};  // (seq, micro_batch) i32, or empty (Note [Document masking])
};

// dqkv from dctx, recomputing the tiles from the forward's qkv, ctx and lse.
struct FlashAttentionBackward {
  Tensor dqkv;  // (seq, micro_batch, qkv_width) =
  Tensor dctx;  // (seq, micro_batch, heads*head_dim)
  Tensor qkv;   // (seq, micro_batch, qkv_width)
  Tensor ctx;   // (seq, micro_batch, heads*head_dim)
  Tensor lse;   // (micro_batch, heads, seq) f32
  FlashAttentionDims dims;
  Tensor document_starts = {};  // as the forward's
};

// ---- flash attention by blocks: ring attention (Note [Flash blocks]) ----
// qkv, kv, dctx and dqkv hold the activation dtype; ctx, lse and the dq, dkv accumulators are
// f32 on every device, except the merged ctx flash_block_backward reads (activation dtype: the
// layer's output, converted once after the merge).

// kv = the k and v features of qkv: kv head g's k at [g*2*D, g*2*D + D), v at [g*2*D + D,
// g*2*D + 2*D) (the travelling key/value block of ring attention: kv_heads = heads /
// group_size of them, Note [Grouped-query attention]; qkv_width = kv_heads*(group_size+2)*D).
struct PackKv {
  Tensor kv;   // (rows, micro_batch, kv_heads*2*head_dim) =
  Tensor qkv;  // (rows, micro_batch, qkv_width)
  int64_t rows;
  int64_t micro_batch;
  int64_t heads;  // query heads
  int64_t head_dim;
  int64_t group_size = 1;  // query heads per kv head
};

// One block: the queries of qkv (dims.seq_len rows; only q is read) over the keys and values
// of kv (dims.kv_len rows), causal on the global positions dims.q_position + i and
// dims.kv_position + j, attention dropout on the coordinates of the unsharded (micro_batch,
// heads, full_len, full_len) probabilities. A query that sees no key gets ctx 0, lse -inf.
struct FlashBlockForward {
  Tensor ctx;  // (seq_len, micro_batch, heads*head_dim) =, f32: normalised over the block
  Tensor lse;  // (micro_batch, heads, seq_len) =, f32: log-sum-exp over the block's keys
  Tensor qkv;  // (seq_len, micro_batch, qkv_width)
  Tensor kv;   // (kv_len, micro_batch, kv_heads*2*head_dim)
  FlashAttentionDims dims;
  Tensor document_starts = {};  // (seq_len, micro_batch) i32 of the block's queries, or empty
};

// Merges a block into the running output of the same queries, in place: lse' =
// logaddexp(lse, lse_block); ctx = exp(lse - lse') ctx + exp(lse_block - lse') ctx_block. A side
// at -inf adds nothing (ctx 0 and lse -inf is the empty start).
struct FlashMerge {
  Tensor ctx;        // (rows, micro_batch, heads*head_dim) in place, f32
  Tensor lse;        // (micro_batch, heads, rows) in place, f32
  Tensor ctx_block;  // (rows, micro_batch, heads*head_dim), f32
  Tensor lse_block;  // (micro_batch, heads, rows), f32
  int64_t rows;
  int64_t micro_batch;
  int64_t heads;
  int64_t head_dim;
};

// One block's share of the attention gradient, from the MERGED ctx and lse of the queries (over
// every block they see): P = exp(S - lse), Delta = rowsum(dctx * ctx), FlashAttention-2's
// per-block terms, so the sums over blocks are the whole attention's gradient.
struct FlashBlockBackward {
  Tensor dq;    // (seq_len, micro_batch, heads*head_dim) +=, f32
  Tensor dkv;   // (kv_len, micro_batch, kv_heads*2*head_dim) +=, f32: kv head g's dk, then dv
  Tensor dctx;  // (seq_len, micro_batch, heads*head_dim)
  Tensor qkv;   // (seq_len, micro_batch, qkv_width)
  Tensor kv;    // (kv_len, micro_batch, kv_heads*2*head_dim)
  Tensor ctx;   // (seq_len, micro_batch, heads*head_dim): the merged output
  Tensor lse;   // (micro_batch, heads, seq_len) f32: the merged log-sum-exp
  FlashAttentionDims dims;
  Tensor document_starts = {};  // as the forward's
};

// dqkv from the f32 accumulators in qkv's grouped layout: kv head g's query heads' dq, then
// its dk and dv (dkv's layout).
struct AssembleQkvGrad {
  Tensor dqkv;  // (rows, micro_batch, qkv_width) =
  Tensor dq;    // (rows, micro_batch, heads*head_dim), f32
  Tensor dkv;   // (rows, micro_batch, kv_heads*2*head_dim), f32
  int64_t rows;
  int64_t micro_batch;
  int64_t heads;  // query heads
  int64_t head_dim;
  int64_t group_size = 1;  // query heads per kv head
};

// ---- GELU, SwiGLU and dropout ----

// out = gelu(input); out may alias input.
struct GeluForward {
  Tensor out;    // (count) =
  Tensor input;  // (count)
  int64_t count;
  GeluKind kind;
};

// dinput = dout * gelu'(input); dinput may alias dout.
struct GeluBackward {
  Tensor dinput;  // (count) =
  Tensor dout;    // (count)
  Tensor input;   // (count)
  int64_t count;
  GeluKind kind;
};

// SwiGLU: input rows hold [gate | up] (each `ffn` wide); out = silu(gate) * up, silu(g) =
// g / (1 + exp(-g)).
struct SwigluForward {
  Tensor out;    // (rows, ffn) =
  Tensor input;  // (rows, 2 * ffn): gate then up
  int64_t rows;
  int64_t ffn;
};

// dgate = dout * up * silu'(gate), dup = dout * silu(gate); dinput may alias input.
struct SwigluBackward {
  Tensor dinput;  // (rows, 2 * ffn) =: dgate then dup
  Tensor dout;    // (rows, ffn)
  Tensor input;   // (rows, 2 * ffn)
  int64_t rows;
  int64_t ffn;
};

// Hidden-state dropout with the Philox mask of the global coordinates (Note [Dropout RNG]):
// local row t is global position seq_offset + t, sample b global sample sample_offset + b.
// out = input * mask / (1 - drop_probability); out may alias input.
struct DropoutHiddenForward {
  Tensor out;    // (seq, micro_batch, channels) =
  Tensor mask;   // (seq, micro_batch, channels) =, u8, 1 = kept
  Tensor input;  // (seq, micro_batch, channels)
  int64_t seq;
  int64_t micro_batch;
  int64_t channels;
  int64_t seq_offset;
  int64_t sample_offset;
  float drop_probability;
  DropoutKey key;
};

// The residual add after a hidden dropout, fused: out = residual + dropout(input) with the mask
// dropout_hidden_forward draws for the same arguments; on the host exactly that op into out
// followed by add (out may alias input, not residual). drop_probability > 0 (a plain add
// otherwise).
struct DropoutAddHiddenForward {
  Tensor out;       // (seq, micro_batch, channels) =
  Tensor mask;      // (seq, micro_batch, channels) =, u8, 1 = kept
  Tensor residual;  // (seq, micro_batch, channels)
  Tensor input;     // (seq, micro_batch, channels)
  int64_t seq;
  int64_t micro_batch;
  int64_t channels;
  int64_t seq_offset;
  int64_t sample_offset;
  float drop_probability;
  DropoutKey key;
};

// Attention-probability dropout, possibly on a head shard: local head h is global head
// head_offset + h (Note [Dropout RNG]).
struct DropoutAttentionForward {
  Tensor out;    // (micro_batch, heads, seq, seq) =
  Tensor mask;   // (micro_batch, heads, seq, seq) =, u8, 1 = kept
  Tensor input;  // (micro_batch, heads, seq, seq)
  int64_t micro_batch;
  int64_t heads;
  int64_t seq;
  int64_t head_offset;
  int64_t sample_offset;
  float drop_probability;
  DropoutKey key;
};

// dinput = dout * mask / (1 - drop_probability); dinput may alias dout.
struct DropoutBackward {
  Tensor dinput;  // (count) =
  Tensor dout;    // (count)
  Tensor mask;    // (count), u8
  int64_t count;
  float drop_probability;
};

// ---- embeddings and the loss ----

// out = wte[token - vocab_start], or 0 for a token outside the table's vocab shard
// [vocab_start, vocab_start + vocab_rows).
struct EmbeddingForward {
  Tensor out;     // (rows, channels) =
  Tensor tokens;  // (rows), i32
  Tensor wte;     // (vocab_rows, channels)
  int64_t rows;
  int64_t channels;
  int64_t vocab_start;
  int64_t vocab_rows;
};

// dwte[token - vocab_start] += dout row, for tokens inside the shard.
struct EmbeddingBackward {
  Tensor dwte;    // (vocab_rows, channels) +=, f32
  Tensor dout;    // (rows, channels)
  Tensor tokens;  // (rows), i32
  int64_t rows;
  int64_t channels;
  int64_t vocab_start;
  int64_t vocab_rows;
};

// out(t, b, :) += wpe[p(t, b)], p(t, b) = seq_offset + t - document_starts(t, b) (the second
// term 0 without starts: Note [Document positions]).
struct PositionEmbeddingForward {
  Tensor out;  // (seq, micro_batch, channels) +=
  Tensor wpe;  // (>= seq_offset + seq, channels)
  int64_t seq;
  int64_t micro_batch;
  int64_t channels;
  int64_t seq_offset;
  Tensor document_starts = {};  // (seq, micro_batch) i32, or empty
};

// dwpe[p(t, b)] += dout(t, b, :) for every row, in the order b, then t (the forward's p).
struct PositionEmbeddingBackward {
  Tensor dwpe;  // (>= seq_offset + seq, channels) +=, f32
  Tensor dout;  // (seq, micro_batch, channels)
  int64_t seq;
  int64_t micro_batch;
  int64_t channels;
  int64_t seq_offset;
  Tensor document_starts = {};  // as the forward's
};

// losses = logsumexp(logits[:vocab]) - logits[target], lse keeps the logsumexp; columns from
// vocab to padded_vocab are padding and take no part. A kIgnoredTarget row's loss is 0.
struct CrossEntropyForward {
  Tensor losses;   // (rows) =, f32
  Tensor lse;      // (rows) =, f32
  Tensor logits;   // (rows, padded_vocab)
  Tensor targets;  // (rows), i32, < vocab, or kIgnoredTarget
  int64_t rows;
  int64_t vocab;
  int64_t padded_vocab;
};

// dlogits = (softmax(logits) - onehot(target)) * scale, 0 on padding and on a kIgnoredTarget
// row; may alias logits.
struct CrossEntropyBackward {
  Tensor dlogits;  // (rows, padded_vocab) =
  Tensor logits;   // (rows, padded_vocab)
  Tensor lse;      // (rows), f32
  Tensor targets;  // (rows), i32
  int64_t rows;
  int64_t vocab;
  int64_t padded_vocab;
  float scale;
};

// Note [Vocab shard]
// A vocab-parallel head's shard holds columns [vocab_start, vocab_start + shard_cols) of the
// padded vocabulary, of which the first real_cols are real tokens. Cross entropy over shards
// combines per-row statistics across ranks: max, then sum of exp, then the target logit, then
// VocabShardFinish; the gradient takes the global lse.

// row_max = max over the shard's real columns (-inf when it has none).
struct VocabShardMax {
  Tensor row_max;  // (rows) =, f32
  Tensor logits;   // (rows, shard_cols)
  int64_t rows;
  int64_t real_cols;
  int64_t shard_cols;
};

// row_sum = sum over real columns of exp(logit - row_max), row_max the global max.
struct VocabShardSumExp {
  Tensor row_sum;  // (rows) =, f32
  Tensor logits;   // (rows, shard_cols)
  Tensor row_max;  // (rows), f32
  int64_t rows;
  int64_t real_cols;
  int64_t shard_cols;
};

// target_logit = the target's logit when it falls in the shard, else 0.
struct VocabShardTargetLogit {
  Tensor target_logit;  // (rows) =, f32
  Tensor logits;        // (rows, shard_cols)
  Tensor targets;       // (rows), i32
  int64_t rows;
  int64_t vocab_start;
  int64_t real_cols;
  int64_t shard_cols;
};

// lse = row_max + log(lse) (lse holds the global sum of exp on entry), losses = lse - losses
// (losses holds the global target logit on entry); 0 on a kIgnoredTarget row.
struct VocabShardFinish {
  Tensor losses;   // (rows) in place, f32
  Tensor lse;      // (rows) in place, f32
  Tensor row_max;  // (rows), f32
  Tensor targets;  // (rows), i32
  int64_t rows;
};

// dlogits = (exp(logit - lse) - [target == column]) * scale on real columns, 0 on padding and on
// a kIgnoredTarget row; may alias logits.
struct VocabShardCrossEntropyBackward {
  Tensor dlogits;  // (rows, shard_cols) =
  Tensor logits;   // (rows, shard_cols)
  Tensor lse;      // (rows), f32, global
  Tensor targets;  // (rows), i32
  int64_t rows;
  int64_t vocab_start;
  int64_t real_cols;
  int64_t shard_cols;
  float scale;
};

// ---- vectors and the optimizer ----

// out = a + b; out may alias a or b.
struct Add {
  Tensor out;  // (count) =
  Tensor a;    // (count)
  Tensor b;    // (count)
  int64_t count;
};

// out(r, :) += bias for every row r.
struct AddBias {
  Tensor out;   // (rows, cols) +=
  Tensor bias;  // (cols)
  int64_t rows;
  int64_t cols;
};

// x *= scale.
struct ScaleInplace {
  Tensor x;  // (count) in place
  int64_t count;
  float scale;
};

// The sum of x's squares in double, deterministic (a fixed order); returned to the host.
struct SumSquares {
  Tensor x;  // (count), f32 (the device also takes bf16)
  int64_t count;
};

// A parameter shard's initial values (Note [Parameter init RNG] in runtime/philox.h).
struct InitParam {
  Tensor out;  // (init.rows, init.cols) =, f32
  ParamInit init;
};

// One AdamW update with PyTorch semantics on fp32 master weights and moments. param_copy, when
// given (f32 or bf16), is set to the updated param in its own dtype in the same pass (the
// weights the model computes with).
struct AdamwStep {
  Tensor param;            // (count) in place, f32
  Tensor exp_avg;          // (count) in place, f32
  Tensor exp_avg_sq;       // (count) in place, f32
  Tensor param_copy = {};  // (count) =, optional
  Tensor grad;             // (count), f32
  int64_t count;
  AdamWParams hyper;
};

}  // namespace runtime::ops
