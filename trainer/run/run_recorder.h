// What a run records besides its checkpoints and its stdout lines (docs/operations.md): on the
// logging rank metrics.jsonl, events.jsonl and the TensorBoard event file; on every rank the
// train.trace window's trace and the train.memory_timeline_step timelines.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>

#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/observe/event_ledger.h"
#include "trainer/observe/metrics.h"
#include "trainer/observe/tensorboard.h"

namespace trainer {

class RunRecorder {
 public:
  // `config` (the config as run), `groups`, `allocator` and `log` outlive the recorder.
  RunRecorder(const Config& config, const parallel::ProcessGroups& groups,
              runtime::Allocator& allocator, std::ostream& log);

  // Opens the run files once: kept through `resumed_step` and appended to, or truncated (a
  // fresh run); then writes `start` and `resume` (when given) to the ledger.
  void open(std::optional<int64_t> resumed_step, const Event& start,
            const std::optional<Event>& resume);
  // A line of the ledger on the logging rank (the files open); nothing elsewhere.
  void record(const Event& event);
  // The step's metrics.jsonl line and TensorBoard scalars on the logging rank.
  void write_metrics(const StepMetrics& metrics);
  // After a rewind to step `to`: metrics.jsonl and the TensorBoard file keep their lines
  // through `to`, so the steps run again appear once.
  void rewind_to(int64_t to);

  // Before step `step`: tracing on when train.trace's window holds it, and the allocator's
  // timeline recording when it is train.memory_timeline_step.
  void begin_step(int64_t step);
  // After step `step`: tracing off, the trace written after the window's last step, and the
  // measured and predicted memory timelines written after train.memory_timeline_step.
  void end_step(int64_t step);
  // A trace recorded and not written yet (a window cut short by the run's end), to
  // <output.dir>/trace_rank<R>.json; `last_step` is the last step it holds.
  void write_trace(int64_t last_step);

 private:
  void write_memory_timelines(int64_t step);

  const Config& config_;
  const parallel::ProcessGroups& groups_;
  runtime::Allocator& allocator_;
  std::ostream& log_;
  bool open_ = false;
  bool trace_recorded_ = false;  // slices recorded and not written yet
  bool timeline_recording_ = false;
  std::unique_ptr<MetricsWriter> metrics_;          // logging rank
  std::unique_ptr<EventLedger> ledger_;             // logging rank
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // logging rank, output.tensorboard
};

}  // namespace trainer
