// TensorBoard scalars of a run (output.tensorboard): one event file per process under
// <output.dir>/tensorboard/, written by the logging rank, one Event per step, flushed per step.
// Rule: a resumed or rewound run rewrites the older files without their events after the
// step it went back to (as metrics.jsonl drops its tail), then starts a file of its own.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "trainer/observe/metrics.h"
#include "trainer/observe/tfrecord.h"

namespace trainer {

// The tags and values of one step (docs/operations.md, "TensorBoard"): train/*, val/loss on
// evaluation steps, comm/*, and memory/<category>_peak_bytes and
// memory/predicted_<category>_peak_bytes for every allocator category.
std::vector<tfrecord::ScalarValue> tensorboard_scalars(const StepMetrics& metrics);

// "events.out.tfevents.": the prefix TensorBoard looks for.
inline constexpr const char* kEventFilePrefix = "events.out.tfevents.";

class TensorBoardWriter {
 public:
  // Creates `dir`. A fresh run (nullopt) removes its event files; a resume or a rewind keeps
  // each file's events through `keep_through_step` (keep_events_through_step). Then opens
  // events.out.tfevents.<unix time>.<hostname> (".1", ".2", ... when the name is taken) and
  // writes its file_version event. InputError when the folder or file cannot be written.
  TensorBoardWriter(const std::string& dir, std::optional<int64_t> keep_through_step);
  void write(const StepMetrics& metrics);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

// The event files under `dir`, by name (TensorBoard's reading order).
std::vector<std::string> event_files(const std::string& dir);
// Rewrites every event file under `dir` keeping its events whose step is <= `step` (the
// file_version event has step 0), through a temporary file and a rename; a torn last record
// (a killed run) is dropped too.
void keep_events_through_step(const std::string& dir, int64_t step);

}  // namespace trainer
