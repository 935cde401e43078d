// One step's gradient reduction: the model-parallel reductions (sequence-parallel partials over
// tp, tied word embeddings over the embedding group), then the data-parallel bucket collectives,
// started while backward runs as soon as a bucket's gradients are final (Note [Overlapped
// gradient reduction]) or all after backward; the same calls either way.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "parallel/pipeline/grad_buckets.h"
#include "recompute/executor.h"

namespace parallel {

// Note [Overlapped gradient reduction]
// A piece's gradients (the head's final layernorm, one layer, the position embeddings) are
// final once the chunk's last backward of the step has run it: the executor reports it (a
// recompute::GradientListener), the piece's partial gradients are all-reduced over tp
// at once (every tp rank runs the same op list, so the tp group sees the same order), and its
// elements count towards their buckets. The tied word embeddings are final only after the
// embedding group's all-reduce, which waits until after backward: the first stage produces them
// last, and a last stage that waited for it mid-backward would hold back the gradients the
// first stage waits for. Buckets start in layout order (Note [Gradient buckets]) once every
// element is final, which is a fixed point of the op list on every dp rank. A replicated
// optimizer's bucket is a reduce-scatter then an all-gather; the all-gather of a bucket starts
// at the first report after the one that started its reduce-scatter (waiting for it, which by
// then has had layers of backward to complete), never when a test happens to find it done: so
// every rank starts the dp group's collectives in one order, and allocations never depend on
// timing. progress() only tests (MPI_Test drives MPI's progress), between pieces and ops.
// finish() reports every piece not yet reported, in backward order, runs the embedding
// all-reduce, starts what is left and waits for everything. Without a listener in the schedule
// (overlap off) finish() does all of it after backward: the same collectives on the same
// buckets, so results are bit-identical and only the start times differ.
struct GradReducerArgs {
  ProcessGroups* groups = nullptr;
  const model::GptParams* grads = nullptr;  // f32 gradients (the flat buffer and its views)
  const GradBucketLayout* layout = nullptr;
  bool sequence_parallel = false;
  bool all_gather = false;  // replicated optimizer: every rank needs every averaged bucket
  runtime::Tensor staging;  // dp f32 elements on grads' device, for the staged bucket
};

// The reduction of one step: made before its schedule runs, finished after.
class GradReducer final : public recompute::GradientListener {
 public:
  explicit GradReducer(const GradReducerArgs& args);
  ~GradReducer() override;
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  void progress() override;
  void final(const recompute::GradientPiece& piece) override;
  // Everything not done yet, then waits: on return the gradients are reduced.
  void finish();
  // Seconds spent inside progress() and final() (during backward), and inside finish().
  double seconds_in_backward() const { return seconds_in_backward_; }
  double seconds_after_backward() const { return seconds_after_backward_; }

 private:
  // A piece of the flat buffer whose gradients become final together.
  struct Piece {
    FlatRange range;
    // Summed over tp when final: the sequence-parallel partials under sequence parallelism and
    // the tensor-parallel ones (q/k norms) under any tensor parallelism.
    std::vector<runtime::Tensor> tp_partials;
    bool reported = false;
  };
  struct InFlight {
    size_t bucket;
    std::unique_ptr<Request> request;
    bool gathering;      // the all-gather half (else the reduce-scatter)
    int64_t started_at;  // the report that started it
  };

  void add_pieces();
  Piece* piece_of(const recompute::GradientPiece& piece);
  void make_final(Piece& piece);
  void add_final(const FlatRange& range);
  // Word embeddings final when both their producers (head, embedding) have reported.
  void maybe_word_embeddings_final();
  void start_ready_buckets();
  // Reduce-scatters started before report `before`: finished, and their all-gathers started.
  void advance_reductions(int64_t before);
  void finish_in_flight(InFlight& in_flight);

  GradReducerArgs args_;
  std::vector<Piece> pieces_;  // head, layers by param index, embedding (empty ranges if absent)
  FlatRange word_embeddings_;  // empty where the rank has none
  bool word_embeddings_final_ = false;
  std::vector<int64_t> final_elements_;  // per bucket
  size_t next_bucket_ = 0;               // in layout order
  std::deque<InFlight> in_flight_;
  int64_t reports_ = 0;
  double seconds_in_backward_ = 0, seconds_after_backward_ = 0;
};

}  // namespace parallel
