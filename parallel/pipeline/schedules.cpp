// Schedules as op lists, and one executor of op lists that does the p2p.
// Tags: the activation entering (microbatch, chunk) is 2 * (mb * chunks + chunk),
// its gradient leaving that chunk backward is the same + 1.
#include "parallel/pipeline/schedules.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <unordered_map>

#include "runtime/trace.h"

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

// The point-to-point messages of one op on `stage`, in the order the op makes them: the
// receive first (at its start), the send last (at its end).
struct Message {
  bool send;
  int peer;
  int tag;
};
struct Messages {
  int64_t stages, chunks;

  int previous(int64_t stage) const { return static_cast<int>((stage + stages - 1) % stages); }
  int next(int64_t stage) const { return static_cast<int>((stage + 1) % stages); }
  int tag(int64_t mb, int64_t chunk, bool gradient) const {
    return static_cast<int>(2 * (mb * chunks + chunk) + (gradient ? 1 : 0));
  }
  std::vector<Message> of(const ScheduleOp& op, int64_t stage) const {
    const bool first = stage == 0 && op.chunk == 0;
    const bool last = stage == stages - 1 && op.chunk == chunks - 1;
    std::vector<Message> messages;
    if (op.forward) {
      if (!first) messages.push_back({false, previous(stage), tag(op.microbatch, op.chunk, false)});
      const int64_t next_chunk = stage == stages - 1 ? op.chunk + 1 : op.chunk;
      if (!last) messages.push_back({true, next(stage), tag(op.microbatch, next_chunk, false)});
    } else {
      if (!last) messages.push_back({false, next(stage), tag(op.microbatch, op.chunk, true)});
      const int64_t previous_chunk = stage == 0 ? op.chunk - 1 : op.chunk;
      if (!first)
        messages.push_back({true, previous(stage), tag(op.microbatch, previous_chunk, true)});
    }
    return messages;
  }
};

// Note [Sent buffers are released in order]
// A sent tensor (comm or workspace memory) must live until its send completed. Releasing it when
// the transfer happens to finish would make the memory a step uses depend on timing; instead a
// send is waited for, and its buffer released, at the first message this rank receives from the
// peer that the peer sent after receiving ours (the peer's op list says which): by then the send
// has completed, so the wait costs nothing, and the release point is the same in every run (and
// in the memory model's replay). Sends the peer answers no more in the step are released at its
// end.

// Runs ops, routing activations forward and gradients backward between stages.
class OpRunner {
 public:
  // `stage_ops`: every stage's op list (the peers' say when a send is answered).
  OpRunner(const PipelineStep& step, const std::vector<std::vector<ScheduleOp>>& stage_ops)
      : step_(step),
        stages_(step.pp->size()),
        stage_(step.pp->rank()),
        chunks_(static_cast<int64_t>(step.chunks.size())),
        messages_{stages_, chunks_} {
    const int previous = messages_.previous(stage_), next = messages_.next(stage_);
    if (previous != stage_) add_release_keys(previous, stage_ops[static_cast<size_t>(previous)]);
    if (next != stage_ && next != previous)  // with 2 stages both neighbours are one peer
      add_release_keys(next, stage_ops[static_cast<size_t>(next)]);
  }

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

  // `last_backward`: no later op of the step runs op.chunk's backward.
  double run(const ScheduleOp& op, bool training, bool last_backward = false) {
    recompute::ChunkExecutor& chunk = *step_.chunks[static_cast<size_t>(op.chunk)];
    const runtime::trace::Scope trace({.name = !training    ? "evaluate"
                                               : op.forward ? "forward"
                                                            : "backward",
                                       .microbatch = op.microbatch,
                                       .chunk = op.chunk});
    std::optional<Message> incoming, outgoing;
    for (const Message& m : messages_.of(op, stage_)) (m.send ? outgoing : incoming) = m;
    if (op.forward) {
      runtime::Tensor input;
      if (incoming) {
        input = chunk.input_buffer();
        receive(input, *incoming);
      }
      recompute::Microbatch batch = step_.microbatch(op.microbatch, op.chunk);
      const recompute::ForwardResult result =
          training ? chunk.forward_step(std::move(batch), input, step_.step)
                   : chunk.evaluate(batch, input);
      if (outgoing) send(result.output, *outgoing);
      return result.loss_sum;
    }
    runtime::Tensor doutput;
    if (incoming) {
      doutput = chunk.output_grad_buffer();
      receive(doutput, *incoming);
    }
    const runtime::Tensor dinput =
        chunk.backward_step(step_.loss_scale, doutput, {step_.gradients, last_backward});
    if (outgoing) send(dinput, *outgoing);
    return 0;
  }

 private:
  struct Pending {
    runtime::Tensor buffer;  // kept alive until the send completed
    std::unique_ptr<Request> request;
    int64_t released_by;  // the received message (key) that releases it; -1: the step's end
  };
  static int64_t key(int peer, int message_tag) {
    return (static_cast<int64_t>(peer) << 32) | static_cast<uint32_t>(message_tag);
  }

  // For each of our sends to `peer`, the message from `peer` that releases it (Note [Sent
  // buffers are released in order]): the first one the peer sends us after receiving it. One
  // walk over the peer's op list.
  void add_release_keys(int peer, const std::vector<ScheduleOp>& peer_ops) {
    std::vector<int> unanswered;  // our tags the peer has received and not yet answered
    for (const ScheduleOp& op : peer_ops) {
      for (const Message& m : messages_.of(op, peer)) {
        if (m.peer != stage_) continue;
        if (!m.send) {
          unanswered.push_back(m.tag);
          continue;
        }
        for (const int tag : unanswered) release_by_[key(peer, tag)] = key(peer, m.tag);
        unanswered.clear();
      }
    }
  }

  // The received message (key) that releases our send `message_tag` to `peer`, or -1.
  int64_t release_key(int peer, int message_tag) const {
    const auto it = release_by_.find(key(peer, message_tag));
    return it == release_by_.end() ? -1 : it->second;
  }

  void send(const runtime::Tensor& tensor, const Message& m) {
    pending_.push_back(
        {tensor, step_.pp->send_async(tensor, m.peer, m.tag), release_key(m.peer, m.tag)});
  }

  void receive(const runtime::Tensor& tensor, const Message& m) {
    step_.pp->recv(tensor, m.peer, m.tag);
    const int64_t received = key(m.peer, m.tag);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->released_by == received) {
        it->request->wait();
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const PipelineStep& step_;
  const int64_t stages_, stage_, chunks_;
  const Messages messages_;
  std::unordered_map<int64_t, int64_t> release_by_;  // our send's key -> its releasing message
  std::deque<Pending> pending_;
};

}  // namespace

double run_schedule(ScheduleKind kind, const PipelineStep& step) {
  std::vector<std::vector<ScheduleOp>> stage_ops;
  for (int64_t stage = 0; stage < step.pp->size(); ++stage) {
    stage_ops.push_back(schedule_ops(kind, step.pp->size(), stage,
                                     static_cast<int64_t>(step.chunks.size()),
                                     step.num_microbatches));
  }
  const std::vector<ScheduleOp>& ops = stage_ops[static_cast<size_t>(step.pp->rank())];
  std::vector<size_t> last_backward(step.chunks.size(), ops.size());  // op index, per chunk
  for (size_t i = 0; i < ops.size(); ++i)
    if (!ops[i].forward) last_backward[static_cast<size_t>(ops[i].chunk)] = i;
  OpRunner runner(step, stage_ops);
  double loss_sum = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool last = i == last_backward[static_cast<size_t>(ops[i].chunk)];
    loss_sum += runner.run(ops[i], /*training=*/true, last);
    if (step.gradients != nullptr) step.gradients->progress();
  }
  runner.finish();
  return loss_sum;
}

double run_evaluation(const PipelineStep& step) {
  std::vector<ScheduleOp> ops;  // every stage: forward of each microbatch through each chunk
  for (int64_t mb = 0; mb < step.num_microbatches; ++mb)
    for (int64_t chunk = 0; chunk < static_cast<int64_t>(step.chunks.size()); ++chunk)
      ops.push_back({true, mb, chunk});
  const std::vector<std::vector<ScheduleOp>> stage_ops(static_cast<size_t>(step.pp->size()), ops);
  OpRunner runner(step, stage_ops);
  double loss_sum = 0;
  for (const ScheduleOp& op : ops) loss_sum += runner.run(op, /*training=*/false);
  runner.finish();
  return loss_sum;
}

}  // namespace parallel
