// Event lines, their timestamps, and the resume-time trimming of per-step JSON-lines files.
#include "trainer/observe/event_ledger.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "runtime/error.h"
#include "trainer/util/atomic_file.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {

Event::Event(std::string kind, int64_t step, int rank)
    : kind_(std::move(kind)), step_(step), rank_(rank) {}

Event& Event::with(const std::string& key, const std::string& value) {
  return add(key, json_quote(value));
}

Event& Event::with(const std::string& key, double value) {
  return add(key, json_number(value));
}

Event& Event::with(const std::string& key, int64_t value) {
  return add(key, std::to_string(value));
}

Event& Event::with(const std::string& key, bool value) {
  return add(key, value ? "true" : "false");
}

Event& Event::with(const std::string& key, const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return add(key, text + "]");
}

Event& Event::add(const std::string& key, std::string json) {
  TRAINER_ASSERT(
      key != "time" && key != "step" && key != "rank" && key != "event" && value(key).empty(),
      "event " << kind_ << ": key \"" << key << "\" written twice");
  values_.emplace_back(key, std::move(json));
  return *this;
}

std::string Event::value(const std::string& key) const {
  for (const auto& [name, text] : values_)
    if (name == key) return text;
  return "";
}

std::string Event::to_json(const std::string& time) const {
  std::string line = "{\"time\": " + json_quote(time) + ", \"step\": " + std::to_string(step_) +
                     ", \"rank\": " + (rank_ == kAllRanks ? "\"all\"" : std::to_string(rank_)) +
                     ", \"event\": " + json_quote(kind_);
  for (const auto& [key, text] : values_) line += ", " + json_quote(key) + ": " + text;
  return line + "}";
}

std::string utc_now_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text;
}

EventLedger::EventLedger(const std::string& path, std::optional<int64_t> keep_through_step)
    : path_(path) {
  if (keep_through_step) keep_jsonl_through_step(path, *keep_through_step);
  out_.open(path, keep_through_step ? std::ios::app : std::ios::trunc);
  if (!out_) throw runtime::InputError("cannot write event ledger " + path);
}

void EventLedger::write(const Event& event) {
  out_ << event.to_json(utc_now_iso8601()) << "\n";
  out_.flush();
  if (!out_) throw runtime::InputError("write failed on event ledger " + path_);
}

std::optional<int64_t> step_of_json_line(const std::string& line) {
  static const std::string kKey = "\"step\": ";
  const size_t at = line.find(kKey);
  if (at == std::string::npos) return std::nullopt;
  char* end = nullptr;
  const long long step = std::strtoll(line.c_str() + at + kKey.size(), &end, 10);
  if (end == line.c_str() + at + kKey.size()) return std::nullopt;
  return step;
}

void keep_jsonl_through_step(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::vector<std::string> lines;
  size_t keep = 0;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    const std::optional<int64_t> line_step = step_of_json_line(line);
    if (line_step && *line_step <= step && line.ends_with('}')) keep = lines.size();
  }
  in.close();
  std::string text;
  for (size_t i = 0; i < keep; ++i) text += lines[i] + "\n";
  write_file_atomically(path, text);
}

}  // namespace trainer
