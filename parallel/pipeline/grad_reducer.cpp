// The step's gradient reduction as pieces become final (Note [Overlapped gradient reduction]):
// pieces of the flat buffer, bucket bookkeeping, and the buckets' collectives in a fixed order.
#include "parallel/pipeline/grad_reducer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>

#include "parallel/pipeline/grad_sync.h"
#include "runtime/error.h"

namespace parallel {

using recompute::GradientPiece;

namespace {
// Adds the seconds of its scope to `total`.
class ScopeTimer {
 public:
  explicit ScopeTimer(double& total) : total_(total), start_(Clock::now()) {}
  ~ScopeTimer() { total_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  ScopeTimer(const ScopeTimer&) = delete;
  ScopeTimer& operator=(const ScopeTimer&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  double& total_;
  Clock::time_point start_;
};
}  // namespace

GradReducer::GradReducer(const GradReducerArgs& args) : args_(args) {
  TRAINER_ASSERT(args_.groups != nullptr && args_.grads != nullptr && args_.layout != nullptr,
                 "GradReducer needs groups, gradients and a bucket layout");
  add_pieces();
  final_elements_.assign(args_.layout->buckets.size(), 0);
  // A replicated optimizer on one dp rank has nothing to average: no bucket collectives.
  if (args_.all_gather && args_.layout->dp_size == 1) next_bucket_ = final_elements_.size();
}

GradReducer::~GradReducer() {
  // Unwinding from an error, peers may never join a collective in flight: abandon it (the job
  // is about to be aborted) rather than wait.
  if (std::uncaught_exceptions() > 0) {
    for (InFlight& in_flight : in_flight_) static_cast<void>(in_flight.request.release());
    return;
  }
  for (InFlight& in_flight : in_flight_) in_flight.request->wait();
}

void GradReducer::add_pieces() {
  const model::GptParams& g = *args_.grads;
  auto offset = [&](const runtime::Tensor& t) {
    return (static_cast<const char*>(t.raw()) - static_cast<const char*>(g.flat.raw())) /
           static_cast<int64_t>(sizeof(float));
  };
  // Each parameter's piece, from its spec: the head's, its layer's, the embedding's, or the
  // tied word embeddings (final only after the embedding group's all-reduce).
  pieces_.resize(g.layers.size() + 2);
  auto piece_for = [&](const model::NamedParam& p) -> Piece& {
    switch (p.piece) {
      case model::ParamPiece::final_norm:
      case model::ParamPiece::output_layer:
        return pieces_.front();
      case model::ParamPiece::layer:
        return pieces_[static_cast<size_t>(p.layer_index + 1)];
      case model::ParamPiece::word_embeddings:
      case model::ParamPiece::position_embeddings:
        break;
    }
    return pieces_.back();
  };
  int64_t covered = 0;
  for (const model::NamedParam& p : g.named) {
    const FlatRange range{offset(p.tensor), offset(p.tensor) + p.tensor.numel()};
    FlatRange& into = p.roles.tied ? word_embeddings_ : piece_for(p).range;
    TRAINER_ASSERT(into.end == into.begin || into.end == range.begin,
                   p.name << " does not follow the other parameters of its piece");
    if (into.end == into.begin) into.begin = range.begin;
    into.end = range.end;
    covered += p.tensor.numel();
    const bool tp_partial =
        (p.sequence_parallel_partial && args_.sequence_parallel) || p.tensor_parallel_partial;
    if (!tp_partial || args_.groups->tp->size() == 1) continue;
    TRAINER_ASSERT(!p.roles.tied, p.name << ": tied and tensor-parallel partial");
    piece_for(p).tp_partials.push_back(p.tensor);
  }
  TRAINER_ASSERT(covered == g.flat.numel(),
                 "gradient pieces cover " << covered << " of " << g.flat.numel() << " elements");
}

GradReducer::Piece* GradReducer::piece_of(const GradientPiece& piece) {
  switch (piece.kind) {
    case GradientPiece::Kind::head:
      return &pieces_.front();
    case GradientPiece::Kind::embedding:
      return &pieces_.back();
    case GradientPiece::Kind::layer:
      break;
  }
  TRAINER_ASSERT(piece.param_layer >= 0 && piece.param_layer + 2 < std::ssize(pieces_),
                 "gradient piece of layer " << piece.param_layer);
  return &pieces_[static_cast<size_t>(piece.param_layer + 1)];
}

void GradReducer::progress() {
  const ScopeTimer timer(seconds_in_backward_);
  for (InFlight& in_flight : in_flight_) static_cast<void>(in_flight.request->done());
}

void GradReducer::final(const GradientPiece& piece) {
  const ScopeTimer timer(seconds_in_backward_);
  ++reports_;
  advance_reductions(reports_);
  Piece& reported = *piece_of(piece);
  if (!reported.reported) make_final(reported);
  start_ready_buckets();
}

void GradReducer::make_final(Piece& piece) {
  piece.reported = true;
  for (const runtime::Tensor& partial : piece.tp_partials)
    args_.groups->tp->all_reduce_sum(partial);
  add_final(piece.range);
  maybe_word_embeddings_final();
}

void GradReducer::add_final(const FlatRange& range) {
  const std::vector<GradBucket>& buckets = args_.layout->buckets;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t begin = std::max(range.begin, buckets[b].begin);
    const int64_t end = std::min(range.end, buckets[b].begin + buckets[b].length);
    if (end > begin) final_elements_[b] += end - begin;
    TRAINER_ASSERT(final_elements_[b] <= buckets[b].length, "bucket " << b << " counted twice");
  }
}

void GradReducer::maybe_word_embeddings_final() {
  if (word_embeddings_final_ || word_embeddings_.end == word_embeddings_.begin) return;
  if (args_.groups->embedding != nullptr) return;  // after the embedding all-reduce, in finish()
  auto done = [](const Piece& piece) {
    return piece.reported || piece.range.end == piece.range.begin;
  };
  if (!done(pieces_.front()) || !done(pieces_.back())) return;
  word_embeddings_final_ = true;
  add_final(word_embeddings_);
}

void GradReducer::start_ready_buckets() {
  const std::vector<GradBucket>& buckets = args_.layout->buckets;
  for (; next_bucket_ < buckets.size() &&
         final_elements_[next_bucket_] == buckets[next_bucket_].length;
       ++next_bucket_) {
    in_flight_.push_back(
        {next_bucket_,
         start_reduce_scatter_bucket(*args_.groups->dp, *args_.layout, buckets[next_bucket_],
                                     args_.grads->flat, args_.staging),
         /*gathering=*/false, reports_});
  }
}

void GradReducer::advance_reductions(int64_t before) {
  if (!args_.all_gather) return;  // the distributed optimizer needs no all-gather of gradients
  for (InFlight& in_flight : in_flight_) {
    if (in_flight.gathering || in_flight.started_at >= before) continue;
    const GradBucket& bucket = args_.layout->buckets[in_flight.bucket];
    finish_reduce_scatter_bucket(*in_flight.request, *args_.layout, bucket, args_.grads->flat,
                                 args_.staging);
    in_flight.request = start_all_gather_bucket(*args_.groups->dp, *args_.layout, bucket,
                                                args_.grads->flat, args_.staging);
    in_flight.gathering = true;
  }
}

void GradReducer::finish_in_flight(InFlight& in_flight) {
  const GradBucket& bucket = args_.layout->buckets[in_flight.bucket];
  if (in_flight.gathering) {
    finish_all_gather_bucket(*in_flight.request, bucket, args_.grads->flat, args_.staging);
  } else {
    finish_reduce_scatter_bucket(*in_flight.request, *args_.layout, bucket, args_.grads->flat,
                                 args_.staging);
  }
}

void GradReducer::finish() {
  const ScopeTimer timer(seconds_after_backward_);
  // Pieces not reported (all of them without a listener), in backward order: head, layers last
  // to first, embedding.
  auto report = [&](Piece& piece) {
    if (!piece.reported) make_final(piece);
  };
  report(pieces_.front());
  for (size_t layer_piece = pieces_.size() - 2; layer_piece > 0; --layer_piece)
    report(pieces_[layer_piece]);
  report(pieces_.back());
  if (!word_embeddings_final_ && args_.groups->embedding != nullptr &&
      word_embeddings_.end > word_embeddings_.begin) {
    args_.groups->embedding->all_reduce_sum(args_.grads->wte);
    word_embeddings_final_ = true;
    add_final(word_embeddings_);
  }
  start_ready_buckets();
  TRAINER_ASSERT(
      next_bucket_ == args_.layout->buckets.size(),
      "gradient buckets left unstarted: " << args_.layout->buckets.size() - next_bucket_);
  advance_reductions(std::numeric_limits<int64_t>::max());
  for (InFlight& in_flight : in_flight_) finish_in_flight(in_flight);
  in_flight_.clear();
}

}  // namespace parallel
