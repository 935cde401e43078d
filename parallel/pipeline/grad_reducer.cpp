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
  auto span = [&](const runtime::Tensor& first, const runtime::Tensor& last) {
    return first.defined() ? FlatRange{offset(first), offset(last) + last.numel()} : FlatRange{};
  };
  pieces_.push_back({span(g.lnf_weight, g.lnf_bias), {}, false});
  for (const model::LayerParams& layer : g.layers)
    pieces_.push_back({span(layer.ln1_weight, layer.fc2_bias), {}, false});
  pieces_.push_back({span(g.wpe, g.wpe), {}, false});
  word_embeddings_ = span(g.wte, g.wte);
  int64_t covered = word_embeddings_.end - word_embeddings_.begin;
  for (const Piece& piece : pieces_) covered += piece.range.end - piece.range.begin;
  TRAINER_ASSERT(covered == g.flat.numel(),
                 "gradient pieces cover " << covered << " of " << g.flat.numel() << " elements");
  for (const model::NamedParam& p : g.named) {
    if (!p.sequence_parallel_partial) continue;
    const int64_t at = offset(p.tensor);
    auto holder = std::find_if(pieces_.begin(), pieces_.end(), [&](const Piece& piece) {
      return piece.range.begin <= at && at < piece.range.end;
    });
    TRAINER_ASSERT(holder != pieces_.end(), p.name << " lies in no gradient piece");
    holder->sequence_parallel_partials.push_back(p.tensor);
  }
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
  if (args_.sequence_parallel && args_.groups->tp->size() > 1) {
    for (const runtime::Tensor& partial : piece.sequence_parallel_partials)
      args_.groups->tp->all_reduce_sum(partial);
  }
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
