// The run's event ledger, <output.dir>/events.jsonl (docs/operations.md, "Event ledger"): one
// JSON object per line, {"time": ISO-8601 UTC, "step": int, "rank": int or "all", "event":
// kind, ...values}, appended and flushed by the logging rank as events happen.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

// The rank of an event every rank agreed on.
inline constexpr int kAllRanks = -1;

class Event {
 public:
  // `step`: completed optimizer steps when it happened (a checkpoint: the step it holds).
  Event(std::string kind, int64_t step, int rank = kAllRanks);

  Event& with(const std::string& key, const std::string& value);
  Event& with(const std::string& key, const char* value) { return with(key, std::string(value)); }
  Event& with(const std::string& key, double value);
  Event& with(const std::string& key, int64_t value);
  Event& with(const std::string& key, bool value);
  Event& with(const std::string& key, const std::vector<int64_t>& values);

  const std::string& kind() const { return kind_; }
  int64_t step() const { return step_; }
  int rank() const { return rank_; }
  // The value of `key` as JSON text, or "" (tests).
  std::string value(const std::string& key) const;
  // The ledger line without its newline, stamped with `time` (ISO-8601 UTC).
  std::string to_json(const std::string& time) const;

 private:
  Event& add(const std::string& key, std::string json);  // asserts `key` is new

  std::string kind_;
  int64_t step_;
  int rank_;
  std::vector<std::pair<std::string, std::string>> values_;  // key, JSON text
};

// "2026-12-01T10:06:45.123Z": now, UTC, milliseconds.
std::string utc_now_iso8601();

class EventLedger {
 public:
  // Appends to `path` after keep_jsonl_through_step(path, *keep_through_step) (a resume), or
  // truncates it (a fresh run: nullopt). InputError when it cannot be written.
  EventLedger(const std::string& path, std::optional<int64_t> keep_through_step);
  void write(const Event& event);

 private:
  std::string path_;
  std::ofstream out_;
};

// The "step" of a JSON line, or nullopt when it has none.
std::optional<int64_t> step_of_json_line(const std::string& line);
// Rewrites a JSON-lines file of per-step records (metrics.jsonl, events.jsonl) up to and
// including its last line whose "step" is <= `step`: on resume from a checkpoint of `step`,
// what follows belongs to the lost tail of the interrupted run. A missing file stays missing.
void keep_jsonl_through_step(const std::string& path, int64_t step);

}  // namespace trainer
