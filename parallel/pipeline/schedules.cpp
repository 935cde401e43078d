// Schedules as op lists, and one executor of op lists that does the p2p.
// Tags: the activation entering (microbatch, chunk) is 2 * (mb * chunks + chunk),
// its gradient leaving that chunk backward is the same + 1.
#include "parallel/pipeline/schedules.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>

namespace parallel {

std::vector<ScheduleOp> schedule_ops(ScheduleKind kind, int64_t stages, int64_t stage,
                                     int64_t chunks, int64_t m) {
  std::vector<ScheduleOp> ops;
  if (kind == ScheduleKind::no_pipeline) {
    for (int64_t mb = 0; mb < m; ++mb) ops.push_back({true, mb, 0}), ops.push_back({false, mb, 0});
    return ops;
  }
  const int64_t total = m * chunks;
  // Op k of the forward (or backward) sequence: the chunk changes every `stages`
  // microbatches, so each stage works on one chunk for a round of `stages`.
  auto forward_op = [&](int64_t k) {
    const int64_t chunk = (k / stages) % chunks;
    return ScheduleOp{true, (k / (stages * chunks)) * stages + k % stages, chunk};
  };
  auto backward_op = [&](int64_t k) {
    ScheduleOp op = forward_op(k);
    op.forward = false;
    op.chunk = chunks - 1 - op.chunk;
    return op;
  };
  const int64_t warmup = kind == ScheduleKind::one_f_one_b
                             ? std::min(stages - stage - 1, m)
                             : std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(forward_op(k));
  for (int64_t k = warmup; k < total; ++k) {
    ops.push_back(forward_op(k));
    ops.push_back(backward_op(k - warmup));
  }
  for (int64_t k = std::max<int64_t>(total - warmup, 0); k < total; ++k)
    ops.push_back(backward_op(k));
  return ops;
}

int64_t predict_activation_peak(const std::vector<ScheduleOp>& ops,
                                const std::vector<recompute::ActivationMemory>& chunks) {
  int64_t live = 0, peak = 0;
  for (const ScheduleOp& op : ops) {
    const recompute::ActivationMemory& m = chunks[static_cast<size_t>(op.chunk)];
    if (op.forward) {
      live += m.forward_end;
      peak = std::max(peak, live);
    } else {
      peak = std::max(peak, live - m.forward_end + m.backward_peak);
      live -= m.forward_end;
    }
  }
  return peak;
}

namespace {

// Runs ops, routing activations forward and gradients backward between stages.
class OpRunner {
 public:
  explicit OpRunner(const PipelineStep& step)
      : step_(step),
        stages_(step.pp->size()),
        stage_(step.pp->rank()),
        chunks_(static_cast<int64_t>(step.chunks.size())) {}

  // Unwinding from an error, pending sends are abandoned, not waited for: a peer may never
  // receive them, and the job is about to be aborted (main's catch).
  ~OpRunner() {
    if (std::uncaught_exceptions() > 0) {
      for (Pending& pending : pending_) static_cast<void>(pending.request.release());
      return;
    }
    finish();
  }

  // Waits for every send of the step (their buffers stay alive until then).
  void finish() {
    for (Pending& pending : pending_) pending.request->wait();
    pending_.clear();
  }

  double run(const ScheduleOp& op, bool training) {
    recompute::ChunkExecutor& chunk = *step_.chunks[static_cast<size_t>(op.chunk)];
    const bool first = stage_ == 0 && op.chunk == 0;
    const bool last = stage_ == stages_ - 1 && op.chunk == chunks_ - 1;
    if (op.forward) {
      runtime::Tensor input;
      if (!first) {
        input = chunk.input_buffer();
        step_.pp->recv(input, previous_stage(), tag(op.microbatch, op.chunk, false));
      }
      recompute::Microbatch batch = step_.microbatch(op.microbatch, op.chunk);
      const recompute::ForwardResult result =
          training ? chunk.forward_step(std::move(batch), input, step_.step)
                   : chunk.evaluate(batch, input);
      if (!last) {
        const int64_t next_chunk = stage_ == stages_ - 1 ? op.chunk + 1 : op.chunk;
        send(result.output, next_stage(), tag(op.microbatch, next_chunk, false));
      }
      return result.loss_sum;
    }
    runtime::Tensor doutput;
    if (!last) {
      doutput = chunk.output_grad_buffer();
      step_.pp->recv(doutput, next_stage(), tag(op.microbatch, op.chunk, true));
    }
    const runtime::Tensor dinput = chunk.backward_step(step_.loss_scale, doutput);
    if (!first) {
      const int64_t previous_chunk = stage_ == 0 ? op.chunk - 1 : op.chunk;
      send(dinput, previous_stage(), tag(op.microbatch, previous_chunk, true));
    }
    return 0;
  }

 private:
  struct Pending {
    runtime::Tensor buffer;  // kept alive until the send completed
    std::unique_ptr<Request> request;
  };
  int previous_stage() const { return static_cast<int>((stage_ + stages_ - 1) % stages_); }
  int next_stage() const { return static_cast<int>((stage_ + 1) % stages_); }
  int tag(int64_t mb, int64_t chunk, bool gradient) const {
    return static_cast<int>(2 * (mb * chunks_ + chunk) + (gradient ? 1 : 0));
  }
  // Finished sends are dropped from the front (sends to one peer finish in order; one to the
  // other neighbour may wait behind them a little longer): a sent tensor (comm memory) lives
  // about as long as its transfer, not until the end of the step.
  void send(const runtime::Tensor& tensor, int peer, int message_tag) {
    while (!pending_.empty() && pending_.front().request->done()) pending_.pop_front();
    pending_.push_back({tensor, step_.pp->send_async(tensor, peer, message_tag)});
  }

  const PipelineStep& step_;
  const int64_t stages_, stage_, chunks_;
  std::deque<Pending> pending_;
};

}  // namespace

double run_schedule(ScheduleKind kind, const PipelineStep& step) {
  const auto ops = schedule_ops(kind, step.pp->size(), step.pp->rank(),
                                static_cast<int64_t>(step.chunks.size()), step.num_microbatches);
  OpRunner runner(step);
  double loss_sum = 0;
  for (const ScheduleOp& op : ops) loss_sum += runner.run(op, /*training=*/true);
  runner.finish();
  return loss_sum;
}

double run_evaluation(const PipelineStep& step) {
  OpRunner runner(step);
  double loss_sum = 0;
  for (int64_t mb = 0; mb < step.num_microbatches; ++mb) {
    for (int64_t chunk = 0; chunk < static_cast<int64_t>(step.chunks.size()); ++chunk) {
      loss_sum += runner.run({true, mb, chunk}, /*training=*/false);
    }
  }
  runner.finish();
  return loss_sum;
}

}  // namespace parallel
