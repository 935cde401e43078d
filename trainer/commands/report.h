// `trainer report RUN_DIR`: <run dir>/report.md from the run's metrics.jsonl, events.jsonl and
// config.yaml, embedding the PNG plots scripts/plot.py draws into <run dir>/plots when a python3
// with matplotlib is there (else the report says why it has none). Reads only; trains nothing.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

struct ReportArgs {
  std::string run_dir;
  std::string plot_script;  // --plot-script; empty: scripts/plot.py of the source tree
  std::string python;       // --python; empty: the first of python3, /usr/bin/python3 that
                            // imports matplotlib
};

// One metrics.jsonl line: its numeric fields by key ("step" and "loss" always), the
// elements of a list of numbers as key[0], key[1], ...
using MetricsLine = std::map<std::string, double>;

// One events.jsonl line.
struct RunEvent {
  std::string time;  // ISO-8601 UTC
  int64_t step = 0;
  std::string rank;  // a rank id or "all"
  std::string kind;  // start, resume, checkpoint, signal, rewind, target_miss, ...
  std::vector<std::pair<std::string, std::string>> values;  // the other keys, as text
};

// What a run directory holds.
struct RunRecord {
  std::string dir;
  std::vector<MetricsLine> metrics;
  std::vector<RunEvent> events;
  bool has_events_file = false;
  // config.yaml's `targets:` entries (key, value as YAML flow text); empty when none.
  std::vector<std::pair<std::string, std::string>> targets;
};

// The plots made for the report: PNG paths relative to the run directory, or why there are none.
struct ReportPlots {
  std::vector<std::string> files;
  std::string missing_reason;  // empty when plot.py ran
};

// --plot-script PATH and --python PATH around the run directory. InputError on bad arguments.
ReportArgs parse_report_args(const std::vector<std::string>& args);

// Reads a run directory. InputError naming the file (and line) when the directory, its
// metrics.jsonl or a line of it or of events.jsonl is missing or corrupt.
RunRecord read_run(const std::string& run_dir);

// The report's markdown.
std::string report_markdown(const RunRecord& run, const ReportPlots& plots);

// Reads the run, draws the plots, writes <run dir>/report.md and says so on `log`. Returns the
// exit code: 0, or 1 when plot.py failed (the report is written without pictures then).
int run_report(const ReportArgs& args, std::ostream& log);

}  // namespace trainer
