// Payload bytes per step, collective by collective, in the order the layer,
// embedding, head, schedule and gradient reductions issue them.
#include "trainer/comm_model.h"

#include <algorithm>

#include "model/recompute_modules.h"
#include "trainer/metrics.h"
#include "trainer/optimizer_memory.h"

namespace trainer {
namespace {

constexpr int64_t kFloat = 4, kDouble = 8;

struct Sizes {
  int64_t full;   // (T, B, C) activations, bytes
  int64_t shard;  // (Ts, B, C) activations, bytes
  int64_t rows;   // T * B
};

// Tensor-parallel payload of one layer's forward and backward.
int64_t layer_forward(const model::LayerDims& d, const Sizes& s) {
  if (d.tp_size == 1) return 0;
  if (!d.sequence_parallel) return 2 * s.full;  // proj, fc2 all-reduce
  return 2 * (s.shard + s.full);                // gather ln, reduce-scatter out (x2)
}

int64_t layer_backward(const model::LayerDims& d, const Sizes& s) {
  if (d.tp_size == 1) return 0;
  if (!d.sequence_parallel) return 2 * s.full;  // copy_to_tp backward (x2)
  // output-grad gathers (x2), input re-gathers (x2), input-grad reduce-scatters (x2)
  return 4 * s.shard + 2 * s.full;
}

// Context-parallel payload of one ring attention (Note [Ring attention]): forward passes N - 1
// key/value blocks in the activation dtype; backward N - 1 of them and N f32 gradient blocks.
int64_t ring_block_elements(const model::LayerDims& d) {  // the rank's keys and values
  return d.seq * d.micro_batch * d.heads * 2 * d.head_dim;
}

int64_t ring_forward(const model::LayerDims& d) {
  if (d.cp_size == 1) return 0;
  return (d.cp_size - 1) * ring_block_elements(d) * runtime::dtype_size(d.activation_dtype);
}

int64_t ring_backward(const model::LayerDims& d) {
  if (d.cp_size == 1) return 0;
  return ring_forward(d) + d.cp_size * ring_block_elements(d) * kFloat;
}

// Whether a selective entry reruns the attention (and so its ring).
bool reruns_attention(const model::LayerRecompute& entry, const model::BlockFeatures& features) {
  const std::vector<model::ForwardPiece> pieces = model::rerun_pieces(entry, features);
  return std::find(pieces.begin(), pieces.end(), model::ForwardPiece::flash_attention) !=
         pieces.end();
}

// The gradient reduction over dp x cp, bucket by bucket: a reduce-scatter of the f32 gradients
// (padded), then an all-gather of this rank's part: of the averaged gradients (replicated
// optimizer, dp > 1 only), or of the updated weights in the compute dtype (distributed, over
// a group of one too).
int64_t data_parallel_bytes(const Config& config, const model::GptParams& params) {
  const bool distributed = config.optimizer.distributed;
  const int64_t replicas = config.parallel.replicas();
  if (!distributed && replicas == 1) return 0;
  const parallel::GradBucketLayout layout =
      grad_bucket_layout(config, params.flat.numel(), replicas, 0);
  const int64_t weight = distributed ? runtime::dtype_size(params.flat.dtype()) : kFloat;
  int64_t bytes = 0;
  for (const parallel::GradBucket& bucket : layout.buckets)
    bytes += bucket.padded_length * kFloat + layout.part_length(bucket) * weight;
  return bytes;
}

}  // namespace

int64_t predict_step_context_bytes(const StageSetup& setup) {
  const model::LayerDims& d = setup.dims;
  int64_t per_microbatch = 0;
  for (const StageChunk& chunk : setup.chunks) {
    for (const model::LayerRecompute& entry : chunk.plan.layers) {
      per_microbatch += ring_forward(d) + ring_backward(d);
      // a full layer, or a selective one that drops the flash stash, runs the ring again
      if (entry.mode == model::RecomputeMode::full || reruns_attention(entry, d.features))
        per_microbatch += ring_forward(d);
    }
  }
  return setup.num_microbatches * per_microbatch;
}

int64_t predict_step_comm_bytes(const Config& config, const StageSetup& setup,
                                const model::GptParams& params) {
  const model::LayerDims& d = setup.dims;
  // Activations travel in their own dtype (bf16 in a bf16 run); statistics and gradients in f32.
  const int64_t act = runtime::dtype_size(d.activation_dtype);
  const Sizes s{d.seq * d.micro_batch * d.hidden * act,
                d.seq_shard() * d.micro_batch * d.hidden * act, d.seq * d.micro_batch};
  const bool tp = d.tp_size > 1, sp = tp && d.sequence_parallel;
  int64_t per_microbatch = 0;
  for (size_t c = 0; c < setup.chunks.size(); ++c) {
    const StageChunk& chunk = setup.chunks[c];
    const recompute::RecomputePlan& plan = chunk.plan;
    for (int64_t i = 0; i < plan.num_layers(); ++i) {
      const model::LayerRecompute& entry = plan.layers[static_cast<size_t>(i)];
      per_microbatch += layer_forward(d, s) + layer_backward(d, s);
      if (entry.mode == model::RecomputeMode::full) per_microbatch += layer_forward(d, s);
      // a selective rebuild re-gathers the inputs of the column-parallel GEMMs it reruns
      if (sp) per_microbatch += model::rebuild_input_gathers(entry, d.features) * s.shard;
    }
    if (chunk.spec.embedding && tp) {
      per_microbatch += s.full;           // all-reduce or reduce-scatter of the lookup
      if (sp) per_microbatch += s.shard;  // backward all-gather
    }
    if (chunk.spec.head && tp) {
      per_microbatch += 3 * s.rows * kFloat;  // max, sum of exp, target logit
      per_microbatch += s.full;               // backward all-reduce / reduce-scatter
      if (sp) per_microbatch += s.shard;      // forward gather of the final layernorm
    }
    const bool last_chunk = c + 1 == setup.chunks.size();
    const bool sends_forward = !(chunk.spec.head && last_chunk);
    const bool sends_backward = !chunk.spec.embedding;
    if (config.parallel.pipeline > 1) {
      per_microbatch += (sends_forward ? s.shard : 0) + (sends_backward ? s.shard : 0);
    }
  }
  int64_t bytes = setup.num_microbatches * per_microbatch + predict_step_context_bytes(setup);
  bytes += 2 * kDouble;  // the loss over pp, then over dp x cp
  if (sp) {
    for (const model::NamedParam& p : params.named)
      if (p.sequence_parallel_partial) bytes += p.tensor.numel() * kFloat;
  }
  if (config.parallel.pipeline > 1 && params.wte.defined()) bytes += params.wte.numel() * kFloat;
  bytes += data_parallel_bytes(config, params);
  bytes += kDouble;  // the gradient norm over tp x pp (the world when distributed)
  const int64_t world_size = config.parallel.world_size();
  if (world_size > 1) bytes += kRankMetricColumns * world_size * kDouble;  // per-rank metrics
  return bytes;
}

}  // namespace trainer
