// The checkpoint-group executor: forward keeps per plan, backward rebuilds.
#include "recompute/executor.h"

#include <vector>

#include "model/flops.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"
#include "runtime/trace.h"

namespace recompute {

using model::LayerRecompute;
using model::RecomputeMode;

ChunkSpec ChunkSpec::whole(int64_t num_layers) {
  ChunkSpec chunk;
  for (int64_t i = 0; i < num_layers; ++i) chunk.layer_ids.push_back(i);
  return chunk;
}

ChunkExecutor::ChunkExecutor(const model::GptConfig& config, const model::GptParams& params,
                             const model::GptParams& grads, RecomputePlan plan,
                             const model::LayerDims& dims, const model::LayerGroups& groups,
                             ChunkSpec chunk, runtime::Allocator& allocator)
    : config_(config),
      params_(params),
      grads_(grads),
      plan_(std::move(plan)),
      train_dims_(dims),
      eval_dims_(dims),
      groups_(groups),
      chunk_(std::move(chunk)),
      allocator_(allocator) {
  eval_dims_.hidden_dropout = eval_dims_.attention_dropout = 0.f;
  TRAINER_ASSERT(plan_.num_layers() == static_cast<int64_t>(chunk_.layer_ids.size()),
                 "plan has " << plan_.num_layers() << " layers, chunk " << chunk_.layer_ids.size());
}

ChunkExecutor::ChunkExecutor(const model::GptConfig& config, const model::GptParams& params,
                             const model::GptParams& grads, RecomputePlan plan, int64_t micro_batch,
                             runtime::Allocator& allocator)
    : ChunkExecutor(config, params, grads, std::move(plan),
                    model::layer_dims(config, micro_batch, true), {},
                    ChunkSpec::whole(config.num_layers), allocator) {}

Tensor ChunkExecutor::hidden(runtime::MemoryCategory category) const {
  return Tensor::empty(allocator_,
                       {train_dims_.seq_shard(), train_dims_.micro_batch, train_dims_.hidden},
                       train_dims_.activation_dtype, category);
}

Tensor ChunkExecutor::hidden(bool keep) const {
  return hidden(keep ? runtime::MemoryCategory::activation : runtime::MemoryCategory::workspace);
}

Tensor ChunkExecutor::input_buffer() const {
  const runtime::memory_timeline::Name timeline_name("received_hidden");
  return hidden(plan_.num_layers() == 0 || plan_.keeps_input(0));
}

Tensor ChunkExecutor::output_grad_buffer() const {
  const runtime::memory_timeline::Name timeline_name("received_dhidden");
  return hidden(runtime::MemoryCategory::workspace);
}

model::LayerContext ChunkExecutor::layer_context(const model::LayerContext& base,
                                                 int64_t layer) const {
  model::LayerContext c = base;
  c.layer = chunk_.layer_ids[static_cast<size_t>(layer)];
  return c;
}

const model::LayerParams& ChunkExecutor::weights(int64_t layer) const {
  return params_.layers[static_cast<size_t>(chunk_.first_param_layer + layer)];
}

const model::LayerParams& ChunkExecutor::gradients(int64_t layer) const {
  return grads_.layers[static_cast<size_t>(chunk_.first_param_layer + layer)];
}

ForwardResult ChunkExecutor::forward_step(Microbatch batch, Tensor input, const StepInfo& step) {
  const int64_t L = plan_.num_layers();
  InFlight& state = in_flight_.emplace_back();
  state.layers.resize(static_cast<size_t>(L));
  state.group_inputs.resize(static_cast<size_t>(L));
  state.context.seed = step.seed;
  state.context.step = step.step;
  state.context.sample_offset = batch.sample_offset;
  state.context.document_starts = batch.document_starts;
  state.context.position_starts = batch.position_starts;

  // The chunk's output is kept by the next layer, by the head, or sent on (comm).
  auto output = [&](int64_t next_layer) {
    const runtime::memory_timeline::Name timeline_name(next_layer == 0 ? "embedding_out"
                                                                       : "layer_out");
    if (next_layer < L) return hidden(plan_.keeps_input(next_layer));
    return chunk_.head ? hidden(true) : hidden(runtime::MemoryCategory::comm);
  };
  Tensor x = input;
  if (chunk_.embedding) {
    x = output(0);
    model::embedding_forward(x, state.embedding, batch.tokens, params_, config_, train_dims_,
                             groups_, state.context, allocator_);
  }
  for (int64_t i = 0; i < L; ++i) {
    const size_t li = static_cast<size_t>(i);
    if (plan_.is_full(i) && plan_.group_start(i) == i) state.group_inputs[li] = x;
    const runtime::trace::Scope trace({.name = "forward", .layer = chunk_.layer_ids[li]});
    Tensor out = output(i + 1);
    model::layer_forward(out, state.layers[li], x, weights(i), train_dims_, groups_,
                         plan_.layers[li], layer_context(state.context, i), allocator_);
    x = out;
  }
  return finish(x, batch.targets, state.head, train_dims_, /*keep=*/true);
}

ForwardResult ChunkExecutor::finish(const Tensor& x, const Tensor& targets, model::HeadStash& head,
                                    const model::LayerDims& dims, bool keep) {
  ForwardResult result;
  if (!chunk_.head) {
    result.output = x;
    return result;
  }
  const runtime::memory_timeline::Name timeline_name("token_losses");
  Tensor losses = Tensor::empty(allocator_, {dims.seq * dims.micro_batch}, runtime::DType::f32,
                                runtime::MemoryCategory::workspace);
  model::head_forward(losses, head, x, targets, params_, config_, dims, groups_, keep, allocator_);
  result.loss_sum = runtime::ops::sum(losses);
  return result;
}

void ChunkExecutor::piece_done(const GradientReport& report, GradientPiece::Kind kind,
                               int64_t layer) const {
  if (report.listener == nullptr) return;
  const GradientPiece piece{
      kind, kind == GradientPiece::Kind::layer ? chunk_.first_param_layer + layer : int64_t{-1}};
  if (report.last_backward) report.listener->final(piece);
  report.listener->progress();
}

void ChunkExecutor::backward_group(InFlight& state, int64_t first, int64_t last, Tensor& dx,
                                   const GradientReport& report) {
  // Rebuild: one forward of the group from its checkpoint, keeping everything.
  const LayerRecompute keep_all{};
  Tensor x = state.group_inputs[static_cast<size_t>(first)];
  for (int64_t j = first; j <= last; ++j) {
    const size_t lj = static_cast<size_t>(j);
    const runtime::trace::Scope trace({.name = "recompute", .layer = chunk_.layer_ids[lj]});
    const runtime::memory_timeline::Name timeline_name("layer_out");
    Tensor out = hidden(j < last);  // the last output is the next group's checkpoint
    model::layer_forward(out, state.layers[lj], x, weights(j), train_dims_, groups_, keep_all,
                         layer_context(state.context, j), allocator_);
    recompute_flops_ += model::layer_forward_flops(train_dims_).total();
    x = out;
  }
  x = Tensor();
  state.group_inputs[static_cast<size_t>(first)] = Tensor();
  for (int64_t j = last; j >= first; --j) {
    const size_t lj = static_cast<size_t>(j);
    const runtime::trace::Scope trace({.name = "backward", .layer = chunk_.layer_ids[lj]});
    dx = model::layer_backward(state.layers[lj], dx, weights(j), gradients(j), train_dims_, groups_,
                               keep_all, layer_context(state.context, j), allocator_);
    piece_done(report, GradientPiece::Kind::layer, j);
  }
}

Tensor ChunkExecutor::backward_step(float loss_scale, const Tensor& doutput,
                                    const GradientReport& report) {
  TRAINER_ASSERT(!in_flight_.empty(), "backward_step with no microbatch in flight");
  InFlight& state = in_flight_.front();
  Tensor dx = doutput;
  if (chunk_.head) {
    dx = model::head_backward(state.head, params_, grads_, config_, train_dims_, groups_,
                              loss_scale, allocator_);
    piece_done(report, GradientPiece::Kind::head, -1);
  }
  for (int64_t i = plan_.num_layers() - 1; i >= 0;) {
    const size_t li = static_cast<size_t>(i);
    if (plan_.is_full(i)) {
      const int64_t first = plan_.group_start(i);
      backward_group(state, first, i, dx, report);
      i = first - 1;
    } else {
      recompute_flops_ += model::selective_recompute_flops(train_dims_, plan_.layers[li]);
      const runtime::trace::Scope trace({.name = "backward", .layer = chunk_.layer_ids[li]});
      dx = model::layer_backward(state.layers[li], dx, weights(i), gradients(i), train_dims_,
                                 groups_, plan_.layers[li], layer_context(state.context, i),
                                 allocator_);
      piece_done(report, GradientPiece::Kind::layer, i);
      --i;
    }
  }
  if (chunk_.embedding) {
    model::embedding_backward(grads_, dx, state.embedding, config_, train_dims_, groups_,
                              allocator_);
    dx = Tensor();
    piece_done(report, GradientPiece::Kind::embedding, -1);
  }
  in_flight_.pop_front();
  return dx;
}

ForwardResult ChunkExecutor::evaluate(const Microbatch& batch, const Tensor& input) {
  const model::LayerRecompute keep_nothing{RecomputeMode::full, {}};
  model::LayerContext context;
  context.sample_offset = batch.sample_offset;
  context.document_starts = batch.document_starts;
  context.position_starts = batch.position_starts;
  Tensor x = input;
  if (chunk_.embedding) {
    model::EmbeddingStash embedding;
    x = hidden(false);
    model::embedding_forward(x, embedding, batch.tokens, params_, config_, eval_dims_, groups_,
                             context, allocator_);
  }
  for (int64_t i = 0; i < plan_.num_layers(); ++i) {
    model::LayerStash stash;
    Tensor out =
        hidden(i + 1 == plan_.num_layers() && !chunk_.head ? runtime::MemoryCategory::comm
                                                           : runtime::MemoryCategory::workspace);
    model::layer_forward(out, stash, x, weights(i), eval_dims_, groups_, keep_nothing,
                         layer_context(context, i), allocator_);
    x = out;
  }
  model::HeadStash head;
  return finish(x, batch.targets, head, eval_dims_, /*keep=*/false);
}

}  // namespace recompute
