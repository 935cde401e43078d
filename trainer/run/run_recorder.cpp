// The run's records: the run files on the logging rank, the trace window and the memory
// timelines on every rank.
#include "trainer/run/run_recorder.h"

#include <ostream>
#include <string>

#include "runtime/memory_timeline.h"
#include "runtime/trace.h"
#include "trainer/observe/memory_timeline_files.h"
#include "trainer/planning/rank_memory.h"

namespace trainer {

RunRecorder::RunRecorder(const Config& config, const parallel::ProcessGroups& groups,
                         runtime::Allocator& allocator, std::ostream& log)
    : config_(config), groups_(groups), allocator_(allocator), log_(log) {}

void RunRecorder::open(std::optional<int64_t> resumed_step, const Event& start,
                       const std::optional<Event>& resume) {
  if (open_) return;
  open_ = true;
  if (!groups_.is_logging_rank()) return;
  const std::string& dir = config_.output.dir;
  metrics_ = std::make_unique<MetricsWriter>(dir + "/metrics.jsonl", resumed_step);
  ledger_ = std::make_unique<EventLedger>(dir + "/events.jsonl", resumed_step);
  if (config_.output.tensorboard)
    tensorboard_ = std::make_unique<TensorBoardWriter>(dir + "/tensorboard", resumed_step);
  ledger_->write(start);
  if (resume) ledger_->write(*resume);
}

void RunRecorder::record(const Event& event) {
  if (ledger_) ledger_->write(event);
}

void RunRecorder::write_metrics(const StepMetrics& metrics) {
  if (metrics_) metrics_->write(metrics);
  if (tensorboard_) tensorboard_->write(metrics);
}

void RunRecorder::rewind_to(int64_t to) {
  if (!groups_.is_logging_rank()) return;
  metrics_ = std::make_unique<MetricsWriter>(config_.output.dir + "/metrics.jsonl", to);
  if (tensorboard_) {  // the old file closes first: its events after `to` go
    tensorboard_.reset();
    tensorboard_ = std::make_unique<TensorBoardWriter>(config_.output.dir + "/tensorboard", to);
  }
}

void RunRecorder::begin_step(int64_t step) {
  const TraceConfig& trace = config_.train.trace;
  if (trace.steps > 0 && step >= trace.start_step && step < trace.start_step + trace.steps) {
    runtime::trace::start();
    trace_recorded_ = true;
  }
  timeline_recording_ = config_.train.memory_timeline_step == step;
  if (timeline_recording_) runtime::memory_timeline::start(allocator_);
}

void RunRecorder::end_step(int64_t step) {
  if (runtime::trace::recording()) {
    runtime::trace::stop();
    const TraceConfig& trace = config_.train.trace;
    if (step >= trace.start_step + trace.steps - 1) write_trace(step);
  }
  if (timeline_recording_) write_memory_timelines(step);
  timeline_recording_ = false;
}

void RunRecorder::write_trace(int64_t last_step) {
  if (!trace_recorded_) return;
  trace_recorded_ = false;
  runtime::trace::stop();
  const parallel::RankCoordinates& r = groups_.coordinates;
  const std::string path =
      config_.output.dir + "/trace_rank" + std::to_string(groups_.world_rank) + ".json";
  runtime::trace::write_chrome_trace(path, groups_.world_rank, rank_label(groups_.world_rank, r),
                                     runtime::trace::take());
  if (groups_.is_logging_rank()) {
    log_ << "trace: steps " << config_.train.trace.start_step << "-" << last_step << " written to "
         << config_.output.dir << "/trace_rank*.json (scripts/trace_merge.py merges them)\n";
  }
}

void RunRecorder::write_memory_timelines(int64_t step) {
  const runtime::memory_timeline::Timeline measured = runtime::memory_timeline::stop();
  runtime::memory_timeline::Timeline predicted;
  predict_rank_memory(config_, groups_.world_rank, &predicted);
  const int64_t rank = groups_.world_rank;
  const std::string label = rank_label(rank, groups_.coordinates);
  const std::string prefix = config_.output.dir + "/memory_timeline_";
  write_memory_timeline(prefix + "measured",
                        {.rank = rank, .label = label, .source = "measured", .step = step},
                        measured);
  write_memory_timeline(prefix + "predicted",
                        {.rank = rank, .label = label, .source = "predicted", .step = std::nullopt},
                        predicted);
  if (groups_.is_logging_rank()) {
    log_ << "memory timeline: step " << step << " written to " << prefix
         << "{measured,predicted}_rank*.json and .trace.json ("
         << (measured.events == predicted.events ? "equal to" : "DIFFERENT from")
         << " the prediction on rank " << rank << ")\n";
  }
}

}  // namespace trainer
