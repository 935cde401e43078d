// The two files of a memory timeline. Event i is at ts = i microseconds in the Chrome trace (the
// timeline has an order, not times), so a predicted and a measured timeline line up in Perfetto.
#include "trainer/observe/memory_timeline_files.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "runtime/error.h"
#include "trainer/util/atomic_file.h"

namespace trainer {
namespace {

namespace timeline = runtime::memory_timeline;
using timeline::Op;

constexpr int kPhaseLane = 1, kAllocationLane = 2;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::string category_bytes_object(const std::array<int64_t, runtime::kNumMemoryCategories>& bytes) {
  std::string out = "{";
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    out += (c == runtime::MemoryCategory::param ? "" : ", ") +
           json_string(std::string(runtime::category_name(c))) + ": " +
           std::to_string(bytes[static_cast<size_t>(c)]);
  }
  return out + "}";
}

// Bytes live per category after each event, and the peak of each over the timeline.
std::array<int64_t, runtime::kNumMemoryCategories> peaks(const timeline::Timeline& t) {
  std::array<int64_t, runtime::kNumMemoryCategories> live = t.start_bytes, peak = t.start_bytes;
  for (const timeline::Event& e : t.events) {
    const auto c = static_cast<size_t>(e.category);
    if (e.op == Op::alloc) live[c] += e.bytes, peak[c] = std::max(peak[c], live[c]);
    if (e.op == Op::free) live[c] -= e.bytes;
  }
  return peak;
}

// Writes `path` atomically (atomic_file.h).
void write_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ostringstream text;
  write(text);
  write_file_atomically(path, text.str());
}

void write_compact(std::ostream& out, const TimelineSource& source, const timeline::Timeline& t) {
  out << "{\"rank\": " << source.rank << ", \"label\": " << json_string(source.label)
      << ", \"source\": " << json_string(source.source);
  if (source.step) out << ", \"step\": " << *source.step;
  out << ",\n\"start_bytes\": " << category_bytes_object(t.start_bytes)
      << ",\n\"peak_bytes\": " << category_bytes_object(peaks(t)) << ",\n\"events\": [";
  for (size_t i = 0; i < t.events.size(); ++i) {
    const timeline::Event& e = t.events[i];
    out << (i == 0 ? "\n" : ",\n") << "{\"seq\": " << i << ", \"op\": \"" << timeline::op_name(e.op)
        << "\"";
    if (e.op == Op::alloc || e.op == Op::free) {
      out << ", \"category\": \"" << runtime::category_name(e.category)
          << "\", \"name\": " << json_string(e.name) << ", \"bytes\": " << e.bytes;
    } else {
      out << ", \"name\": " << json_string(e.name);
    }
    out << "}";
  }
  out << "\n]}\n";
}

void write_chrome(std::ostream& out, const TimelineSource& source, const timeline::Timeline& t) {
  const std::string pid = std::to_string(source.rank);
  auto metadata = [&](const char* name, int tid, const std::string& args) {
    out << ",\n{\"name\": \"" << name << "\", \"ph\": \"M\", \"ts\": 0, \"pid\": " << pid
        << ", \"tid\": " << tid << ", \"args\": " << args << "}";
  };
  auto counter = [&](runtime::MemoryCategory c, size_t ts, int64_t bytes) {
    out << ",\n{\"name\": \"" << runtime::category_name(c)
        << " bytes\", \"ph\": \"C\", \"ts\": " << ts << ", \"pid\": " << pid
        << ", \"args\": {\"bytes\": " << bytes << "}}";
  };
  out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": " << source.rank
      << ", \"source\": " << json_string(source.source)
      << ", \"ts\": \"event index (event i at i us)\"}, \"traceEvents\": [\n";
  out << "{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " << pid
      << ", \"tid\": 0, \"args\": {\"name\": "
      << json_string(source.label + " memory (" + source.source + ")") << "}}";
  metadata("process_sort_index", 0, "{\"sort_index\": " + pid + "}");
  metadata("thread_name", kPhaseLane, "{\"name\": \"phases\"}");
  metadata("thread_name", kAllocationLane, "{\"name\": \"allocations\"}");
  std::array<int64_t, runtime::kNumMemoryCategories> live = t.start_bytes;
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories)
    counter(c, 0, live[static_cast<size_t>(c)]);
  std::vector<size_t> open;  // begin events of the open phases
  for (size_t i = 0; i < t.events.size(); ++i) {
    const timeline::Event& e = t.events[i];
    if (e.op == Op::begin) {
      open.push_back(i);
    } else if (e.op == Op::end) {
      TRAINER_ASSERT(!open.empty(), "memory timeline phase " << e.name << " ends unopened");
      const size_t begin = open.back();
      open.pop_back();
      out << ",\n{\"name\": " << json_string(e.name)
          << ", \"cat\": \"phase\", \"ph\": \"X\", \"ts\": " << begin << ", \"dur\": " << i - begin
          << ", \"pid\": " << pid << ", \"tid\": " << kPhaseLane << ", \"args\": {}}";
    } else {
      const auto c = static_cast<size_t>(e.category);
      live[c] += e.op == Op::alloc ? e.bytes : -e.bytes;
      out << ",\n{\"name\": " << json_string(std::string(timeline::op_name(e.op)) + " " + e.name)
          << ", \"cat\": \"" << runtime::category_name(e.category)
          << "\", \"ph\": \"i\", \"s\": \"t\", \"ts\": " << i << ", \"pid\": " << pid
          << ", \"tid\": " << kAllocationLane << ", \"args\": {\"category\": \""
          << runtime::category_name(e.category) << "\", \"bytes\": " << e.bytes << "}}";
      counter(e.category, i, live[c]);
    }
  }
  out << "\n]}\n";
}

}  // namespace

std::string rank_label(int64_t rank, const parallel::RankCoordinates& r) {
  return "rank " + std::to_string(rank) + " (pp " + std::to_string(r.pp) + ", tp " +
         std::to_string(r.tp) + ", cp " + std::to_string(r.cp) + ", dp " + std::to_string(r.dp) +
         ")";
}

std::string timeline_json_path(const std::string& prefix, int64_t rank) {
  return prefix + "_rank" + std::to_string(rank) + ".json";
}

std::string timeline_trace_path(const std::string& prefix, int64_t rank) {
  return prefix + "_rank" + std::to_string(rank) + ".trace.json";
}

void write_memory_timeline(const std::string& prefix, const TimelineSource& source,
                           const timeline::Timeline& timeline) {
  write_file(timeline_json_path(prefix, source.rank),
             [&](std::ostream& out) { write_compact(out, source, timeline); });
  write_file(timeline_trace_path(prefix, source.rank),
             [&](std::ostream& out) { write_chrome(out, source, timeline); });
}

}  // namespace trainer
