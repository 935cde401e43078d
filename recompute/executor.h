// Runs one model chunk (optionally the embedding, a run of this rank's layers,
// optionally the head) for a microbatch under a recompute plan. forward_step
// keeps what the plan says; backward_step rebuilds checkpoint groups (one
// forward of the group with everything kept) and selective drops, then runs the
// layers' backward in reverse. Microbatches in flight are held first-in
// first-out, as every pipeline schedule needs.
#pragma once

#include <deque>
#include <vector>

#include "model/embedding_head.h"
#include "model/gpt_params.h"
#include "recompute/plan.h"

namespace recompute {

using runtime::Tensor;

struct Microbatch {
  Tensor tokens;                // (T, B) i32, on the first stage (the embedding keeps it)
  Tensor targets;               // (T, B) i32, on the last stage (the head keeps it)
  Tensor document_starts = {};  // (T, B) i32 on every stage with documents masked, else empty
                                // (Note [Document masking]; the layers' context keeps it)
  Tensor position_starts = {};  // the same starts with positions reset per document, else empty
                                // (Note [Document positions])
  int64_t sample_offset = 0;    // global-batch index of its first sample
};

struct StepInfo {
  uint64_t seed = 0;
  int64_t step = 0;  // 1-based optimizer step (Philox key)
};

// Which part of the model a chunk runs.
struct ChunkSpec {
  int64_t first_param_layer = 0;   // index into GptParams::layers of the chunk's first layer
  std::vector<int64_t> layer_ids;  // global ids of the chunk's layers
  bool embedding = true;
  bool head = true;

  static ChunkSpec whole(int64_t num_layers);
};

// A part of the model whose parameter gradients backward_step reports on.
struct GradientPiece {
  enum class Kind { head, layer, embedding };
  Kind kind = Kind::layer;
  int64_t param_layer = -1;  // layer: index into GptParams::layers
};

// Told by backward_step where the gradients stand, so that their reduction can start while
// backward goes on (Note [Overlapped gradient reduction] in parallel/pipeline/grad_reducer.h).
// recompute knows nothing of who listens.
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  // After each piece's backward, of any microbatch: a point to progress communication.
  virtual void progress() = 0;
  // No later backward of the step writes the piece's gradients (called in the chunk's last
  // backward of the step, in backward order: head, layers last to first, embedding).
  virtual void final(const GradientPiece& piece) = 0;
};

// Whom backward_step tells, and whether it is the chunk's last backward of the step.
struct GradientReport {
  GradientListener* listener = nullptr;
  bool last_backward = false;
};

struct ForwardResult {
  double loss_sum = 0;  // with the head: sum of the microbatch's token losses
  Tensor output;        // without the head: the last layer's output (category comm)
};

class ChunkExecutor {
 public:
  // `dims`: the training shapes of one layer on this rank (layer_dims()); `groups`: the
  // groups its collectives go over.
  ChunkExecutor(const model::GptConfig& config, const model::GptParams& params,
                const model::GptParams& grads, RecomputePlan plan, const model::LayerDims& dims,
                const model::LayerGroups& groups, ChunkSpec chunk, runtime::Allocator& allocator);

  // The whole model on one rank (no groups).
  ChunkExecutor(const model::GptConfig& config, const model::GptParams& params,
                const model::GptParams& grads, RecomputePlan plan, int64_t micro_batch,
                runtime::Allocator& allocator);

  // Training forward of one microbatch. `input` is the previous stage's output
  // (undefined with the embedding); take it from input_buffer().
  ForwardResult forward_step(Microbatch batch, Tensor input, const StepInfo& step);
  // With the embedding and the head: the sum of the microbatch's token losses.
  double forward_step(Microbatch batch, const StepInfo& step) {
    return forward_step(std::move(batch), Tensor(), step).loss_sum;
  }
  // Backward of the oldest microbatch in flight; parameter gradients accumulate.
  // With the head, loss_scale multiplies d(sum of token losses); otherwise
  // `doutput` is the next stage's input gradient. Returns the input gradient
  // (undefined with the embedding). `report`: told after each piece (head, layer, embedding).
  Tensor backward_step(float loss_scale, const Tensor& doutput = Tensor(),
                       const GradientReport& report = {});
  // Forward without dropout and without keeping anything.
  ForwardResult evaluate(const Microbatch& batch, const Tensor& input);

  // A tensor to receive this chunk's input into (Ts, B, C), and one for the
  // gradient of its output (workspace: backward consumes it at once).
  Tensor input_buffer() const;
  Tensor output_grad_buffer() const;
  const ChunkSpec& chunk() const { return chunk_; }
  // Matmul FLOPs spent rebuilding activations since the last reset.
  int64_t recompute_flops() const { return recompute_flops_; }
  void reset_recompute_flops() { recompute_flops_ = 0; }

 private:
  struct InFlight {
    model::EmbeddingStash embedding;
    std::vector<model::LayerStash> layers;
    std::vector<Tensor> group_inputs;  // input of each checkpoint group, at its first layer
    model::HeadStash head;
    model::LayerContext context;  // layer field set per layer
  };
  Tensor hidden(runtime::MemoryCategory category) const;
  Tensor hidden(bool keep) const;
  model::LayerContext layer_context(const model::LayerContext& base, int64_t layer) const;
  const model::LayerParams& weights(int64_t layer) const;
  const model::LayerParams& gradients(int64_t layer) const;
  void backward_group(InFlight& state, int64_t first, int64_t last, Tensor& dx,
                      const GradientReport& report);
  // Tells `report`'s listener that `piece`'s backward is done.
  void piece_done(const GradientReport& report, GradientPiece::Kind kind, int64_t layer) const;
  // The chunk's result for its last hidden state x: the loss sum through the
  // head (kept in `head` for backward when keep), or x itself to send on.
  ForwardResult finish(const Tensor& x, const Tensor& targets, model::HeadStash& head,
                       const model::LayerDims& dims, bool keep);

  const model::GptConfig& config_;
  const model::GptParams& params_;
  const model::GptParams& grads_;
  RecomputePlan plan_;
  model::LayerDims train_dims_;
  model::LayerDims eval_dims_;
  model::LayerGroups groups_;
  ChunkSpec chunk_;
  runtime::Allocator& allocator_;
  std::deque<InFlight> in_flight_;
  int64_t recompute_flops_ = 0;
};

}  // namespace recompute
