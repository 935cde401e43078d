// A memory timeline (runtime/memory_timeline.h) as files, per rank: <prefix>_rank<R>.json, a
// compact JSON of its events, and <prefix>_rank<R>.trace.json, the Chrome trace event format
// (counter tracks per category, an instant per alloc/free, a slice per phase). Both are written
// through a temporary file and a rename; docs/operations.md, "Memory timeline", is the format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "parallel/core/process_groups.h"
#include "runtime/memory_timeline.h"

namespace trainer {

struct TimelineSource {
  int64_t rank = 0;
  std::string label;            // "rank 3 (pp 1, tp 1, cp 0, dp 0)"
  std::string source;           // "predicted" (the meta replay) or "measured" (a run)
  std::optional<int64_t> step;  // measured: the step recorded
};

// "rank 3 (pp 1, tp 1, cp 0, dp 0)": a rank in traces and timelines.
std::string rank_label(int64_t rank, const parallel::RankCoordinates& r);

// "<prefix>_rank<R>.json" and "<prefix>_rank<R>.trace.json".
std::string timeline_json_path(const std::string& prefix, int64_t rank);
std::string timeline_trace_path(const std::string& prefix, int64_t rank);

// Writes both files; InputError naming the file when one cannot be written.
void write_memory_timeline(const std::string& prefix, const TimelineSource& source,
                           const runtime::memory_timeline::Timeline& timeline);

}  // namespace trainer
