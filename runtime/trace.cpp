// The trace recorder's record (one process-wide list of slices, appended by the recording
// thread) and its Chrome trace event writer.
#include "runtime/trace.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "runtime/error.h"
#include "runtime/memory_timeline.h"

namespace runtime::trace {
namespace {

struct Recorder {
  std::vector<Slice> slices;
  std::vector<int64_t> open;    // indices of the open slices, innermost last
  std::thread::id thread;       // the thread that records
  int64_t origin_system_ns = 0;  // the clocks at the first start()
  int64_t origin_steady_ns = 0;
  bool started_once = false;
};

Recorder& recorder() {
  static Recorder record;
  return record;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t system_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Nanoseconds as microseconds with three decimals, exactly.
std::string microseconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  return text;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;  // no control characters in names
    out += c;
  }
  return out + "\"";
}

std::string slice_args(const SliceInfo& info) {
  std::string args;
  auto add = [&](const char* key, const std::string& json) {
    args += (args.empty() ? "" : ", ") + std::string("\"") + key + "\": " + json;
  };
  auto number = [&](const char* key, int64_t value) {
    if (value >= 0) add(key, std::to_string(value));
  };
  number("step", info.step);
  number("layer", info.layer);
  number("microbatch", info.microbatch);
  number("chunk", info.chunk);
  if (info.group != nullptr) add("group", json_string(info.group));
  number("bytes", info.bytes);
  return "{" + args + "}";
}

std::string metadata_event(const char* name, int64_t pid, int64_t tid, const std::string& args) {
  return "{\"name\": \"" + std::string(name) +
         "\", \"ph\": \"M\", \"ts\": 0, \"pid\": " + std::to_string(pid) +
         ", \"tid\": " + std::to_string(tid) + ", \"args\": " + args + "}";
}

}  // namespace

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::compute:
      return "compute";
    case Lane::comm:
      return "comm";
  }
  return "lane";
}

int64_t detail::open(const SliceInfo& info) {
  Recorder& record = recorder();
  if (std::this_thread::get_id() != record.thread) return -1;
  Slice slice{info, steady_ns() - record.origin_steady_ns, -1};
  if (!record.open.empty()) {  // the innermost open slice has resolved its own already
    const SliceInfo& parent = record.slices[static_cast<size_t>(record.open.back())].info;
    for (auto [field, inherited] :
         {std::pair{&slice.info.layer, parent.layer},
          std::pair{&slice.info.microbatch, parent.microbatch},
          std::pair{&slice.info.chunk, parent.chunk}, std::pair{&slice.info.step, parent.step}}) {
      if (*field < 0) *field = inherited;
    }
  }
  record.slices.push_back(slice);
  const auto index = static_cast<int64_t>(record.slices.size()) - 1;
  record.open.push_back(index);
  return index;
}

void detail::close(int64_t index) {
  Recorder& record = recorder();
  if (index >= static_cast<int64_t>(record.slices.size())) return;  // taken meanwhile
  Slice& slice = record.slices[static_cast<size_t>(index)];
  slice.duration_ns = steady_ns() - record.origin_steady_ns - slice.start_ns;
  TRAINER_ASSERT(!record.open.empty() && record.open.back() == index,
                 "trace scopes closed out of order: " << slice_name(slice.info));
  record.open.pop_back();
}

void detail::follow_phases(bool on) {
  if (on)
    followers.fetch_or(kPhases, std::memory_order_relaxed);
  else
    followers.fetch_and(~kPhases, std::memory_order_relaxed);
}

void Scope::open(const SliceInfo& info) {
  const unsigned following = detail::followers.load(std::memory_order_relaxed);
  if ((following & detail::kSlices) != 0) index_ = detail::open(info);
  if ((following & detail::kPhases) != 0) phase_ = memory_timeline::detail::begin_phase(info);
}

void Scope::close() {
  if (phase_) memory_timeline::detail::end_phase();
  if (index_ >= 0) detail::close(index_);
}

void start() {
  Recorder& record = recorder();
  record.thread = std::this_thread::get_id();
  if (!record.started_once) {
    record.origin_system_ns = system_ns();
    record.origin_steady_ns = steady_ns();
    record.started_once = true;
  }
  detail::followers.fetch_or(detail::kSlices, std::memory_order_relaxed);
}

void stop() {
  detail::followers.fetch_and(~detail::kSlices, std::memory_order_relaxed);
}

std::vector<Slice> take() {
  Recorder& record = recorder();
  TRAINER_ASSERT(record.open.empty(), "trace taken with " << record.open.size() << " open slices");
  std::vector<Slice> slices;
  slices.swap(record.slices);
  return slices;
}

int64_t time_origin_ns() { return recorder().origin_system_ns; }

std::string slice_name(const SliceInfo& info) {
  std::string name = info.name;
  if (info.detail != nullptr) name += std::string(" ") + info.detail;
  if (info.lane == Lane::compute) {
    if (info.layer >= 0)
      name += " L" + std::to_string(info.layer);
    else if (info.chunk >= 0)
      name += " chunk" + std::to_string(info.chunk);
    if (info.microbatch >= 0) name += " mb" + std::to_string(info.microbatch);
  }
  if (info.group != nullptr) name += std::string(" ") + info.group;
  return name;
}

void write_chrome_trace(const std::string& path, int64_t rank, const std::string& process_label,
                        const std::vector<Slice>& slices) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": " << rank
        << ", \"time_origin_ns\": " << time_origin_ns() << "}, \"traceEvents\": [\n";
    out << metadata_event("process_name", rank, 0, "{\"name\": " + json_string(process_label) + "}")
        << ",\n"
        << metadata_event("process_sort_index", rank, 0,
                          "{\"sort_index\": " + std::to_string(rank) + "}");
    for (const Lane lane : {Lane::compute, Lane::comm}) {
      out << ",\n"
          << metadata_event("thread_name", rank, static_cast<int>(lane),
                            "{\"name\": \"" + std::string(lane_name(lane)) + "\"}");
    }
    for (const Slice& slice : slices) {
      if (slice.duration_ns < 0) continue;  // still open when taken (cannot happen: take asserts)
      out << ",\n{\"name\": " << json_string(slice_name(slice.info)) << ", \"cat\": \""
          << lane_name(slice.info.lane)
          << "\", \"ph\": \"X\", \"ts\": " << microseconds(slice.start_ns)
          << ", \"dur\": " << microseconds(slice.duration_ns) << ", \"pid\": " << rank
          << ", \"tid\": " << static_cast<int>(slice.info.lane)
          << ", \"args\": " << slice_args(slice.info) << "}";
    }
    out << "\n]}\n";
    out.flush();
    if (!out) throw InputError("cannot write trace file " + temporary);
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    throw InputError("cannot rename " + temporary + " to " + path + ": " + error.message());
}

}  // namespace runtime::trace
