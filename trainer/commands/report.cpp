// trainer report: reads a run directory, runs scripts/plot.py in a child process (its output
// captured, never a shell), and writes report.md. The numbers come from metrics.jsonl as
// written; the recompute share is (hardware - model) / model TFLOP/s of the same step.
#include "trainer/commands/report.h"

#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "runtime/allocator.h"
#include "runtime/error.h"
#include "trainer/export/json_object.h"
#include "trainer/util/format_bytes.h"

#ifndef TRAINER_PLOT_SCRIPT
#define TRAINER_PLOT_SCRIPT "scripts/plot.py"
#endif

namespace trainer {
namespace {

namespace fs = std::filesystem;

// A JSON number, or the nan/inf the metrics writer prints for non-finite doubles.
std::optional<double> number_of(const YAML::Node& node) {
  if (!node.IsScalar()) return std::nullopt;
  const std::string& text = node.Scalar();
  if (text == "nan" || text == "-nan") return std::numeric_limits<double>::quiet_NaN();
  if (text == "inf" || text == "-inf") return text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
  try {
    return node.as<double>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// A node as one line of text: a scalar as it is, a list or map in JSON-like flow style.
std::string text_of(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// The non-empty lines of a JSON-lines file as objects, each with its 1-based line number.
std::vector<std::pair<int, YAML::Node>> read_json_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw runtime::InputError(path + ": cannot be read");
  std::vector<std::pair<int, YAML::Node>> objects;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + " line " + std::to_string(number);
    objects.emplace_back(number, load_json_object(line, where, "not JSON", "not a JSON object"));
  }
  return objects;
}

// The MetricsLine key of a list element: key[index].
std::string element_key(const std::string& key, size_t index) {
  std::string element = key;
  element += '[';
  element += std::to_string(index);
  element += ']';
  return element;
}

// A key a line must hold, as a number.
double required_number(const YAML::Node& object, const std::string& key, const std::string& where) {
  const std::optional<double> value = object[key] ? number_of(object[key]) : std::nullopt;
  if (!value) throw runtime::InputError(where + ": no number \"" + key + "\"");
  return *value;
}

std::vector<MetricsLine> read_metrics(const std::string& path) {
  if (!fs::exists(path))
    throw runtime::InputError(path + ": no such file (is its folder a run's output.dir?)");
  std::vector<MetricsLine> lines;
  for (const auto& [number, object] : read_json_lines(path)) {
    const std::string where = path + " line " + std::to_string(number);
    MetricsLine line;
    for (const char* key : {"step", "loss"}) line[key] = required_number(object, key, where);
    for (const auto& entry : object) {
      const std::string key = entry.first.Scalar();
      if (const std::optional<double> value = number_of(entry.second)) line[key] = *value;
      if (!entry.second.IsSequence()) continue;
      for (size_t i = 0; i < entry.second.size(); ++i) {
        if (const std::optional<double> value = number_of(entry.second[i]))
          line[element_key(key, i)] = *value;
      }
    }
    lines.push_back(std::move(line));
  }
  if (lines.empty()) throw runtime::InputError(path + ": no steps");
  return lines;
}

std::vector<RunEvent> read_events(const std::string& path) {
  std::vector<RunEvent> events;
  for (const auto& [number, object] : read_json_lines(path)) {
    const std::string where = path + " line " + std::to_string(number);
    if (!object["event"] || !object["event"].IsScalar())
      throw runtime::InputError(where + ": no \"event\"");
    RunEvent event;
    event.step = static_cast<int64_t>(required_number(object, "step", where));
    event.kind = object["event"].Scalar();
    if (object["time"]) event.time = text_of(object["time"]);
    if (object["rank"]) event.rank = text_of(object["rank"]);
    for (const auto& entry : object) {
      const std::string key = entry.first.Scalar();
      if (key != "time" && key != "step" && key != "rank" && key != "event")
        event.values.emplace_back(key, text_of(entry.second));
    }
    events.push_back(std::move(event));
  }
  return events;
}

// config.yaml's `targets:` entries; none when the file or the section is absent.
std::vector<std::pair<std::string, std::string>> read_targets(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> targets;
  if (!fs::exists(path)) return targets;
  YAML::Node config;
  try {
    config = YAML::LoadFile(path);
  } catch (const YAML::Exception& error) {
    throw runtime::InputError(path + ": not YAML: " + error.what());
  }
  if (!config.IsMap() || !config["targets"] || !config["targets"].IsMap()) return targets;
  for (const auto& entry : config["targets"])
    targets.emplace_back(entry.first.Scalar(), text_of(entry.second));
  return targets;
}

}  // namespace

ReportArgs parse_report_args(const std::vector<std::string>& args) {
  ReportArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw runtime::InputError("report: " + a + " needs a value");
      return args[++i];
    };
    if (a == "--plot-script")
      parsed.plot_script = value();
    else if (a == "--python")
      parsed.python = value();
    else if (a.rfind("--", 0) == 0 || !parsed.run_dir.empty())
      throw runtime::InputError("report: unknown argument '" + a + "' (see trainer report --help)");
    else
      parsed.run_dir = a;
  }
  if (parsed.run_dir.empty()) throw runtime::InputError("report: RUN_DIR is required");
  return parsed;
}

RunRecord read_run(const std::string& run_dir) {
  if (!fs::is_directory(run_dir))
    throw runtime::InputError("report: run directory " + run_dir + " does not exist");
  RunRecord run;
  run.dir = run_dir;
  run.metrics = read_metrics(run_dir + "/metrics.jsonl");
  const std::string events_path = run_dir + "/events.jsonl";
  run.has_events_file = fs::exists(events_path);
  if (run.has_events_file) run.events = read_events(events_path);
  run.targets = read_targets(run_dir + "/config.yaml");
  return run;
}

namespace {

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// The values of `key` over the metrics lines (those holding it and finite), from line `first`.
std::vector<double> column(const std::vector<MetricsLine>& metrics, const std::string& key,
                           size_t first = 0) {
  std::vector<double> values;
  for (size_t i = first; i < metrics.size(); ++i) {
    const auto found = metrics[i].find(key);
    if (found != metrics[i].end() && std::isfinite(found->second)) values.push_back(found->second);
  }
  return values;
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle),
                   values.end());
  double result = values[middle];
  if (values.size() % 2 == 0)
    result = (result + *std::max_element(values.begin(),
                                         values.begin() + static_cast<std::ptrdiff_t>(middle))) /
             2;
  return result;
}

// The last and the lowest value of `key` with their steps ("-" when the run logged none).
std::string last_and_best(const std::vector<MetricsLine>& metrics, const std::string& key) {
  const MetricsLine* last = nullptr;
  const MetricsLine* best = nullptr;
  for (const MetricsLine& line : metrics) {
    const auto found = line.find(key);
    if (found == line.end()) continue;
    last = &line;
    if (std::isfinite(found->second) && (!best || found->second < best->at(key))) best = &line;
  }
  if (!last) return "- | -";
  auto at = [&](const MetricsLine& line) {
    return fixed(line.at(key), 4) + " (step " + fixed(line.at("step"), 0) + ")";
  };
  return at(*last) + " | " + (best ? at(*best) : "-");
}

// A blend's per-dataset validation losses are logged as val_loss/<name>.
constexpr std::string_view kDatasetValLoss = "val_loss/";

// The val_loss/<name> keys the run logged, in the order of first appearance.
std::vector<std::string> dataset_val_loss_keys(const std::vector<MetricsLine>& metrics) {
  std::vector<std::string> keys;
  for (const MetricsLine& line : metrics) {
    for (const auto& entry : line) {
      if (entry.first.starts_with(kDatasetValLoss) &&
          std::find(keys.begin(), keys.end(), entry.first) == keys.end())
        keys.push_back(entry.first);
    }
  }
  return keys;
}

// The first metrics line the medians read: step 1 includes the warm-up (first allocations and
// first touches of memory), so it is left out when there are others.
size_t steady_from(const std::vector<MetricsLine>& metrics) {
  return metrics.size() > 1 ? 1 : 0;
}

std::vector<double> recompute_shares(const std::vector<MetricsLine>& metrics) {
  std::vector<double> shares;
  for (size_t i = steady_from(metrics); i < metrics.size(); ++i) {
    const auto share = metrics[i].find("recompute_share");  // metrics.jsonl files that have it
    if (share != metrics[i].end()) {
      shares.push_back(share->second);
      continue;
    }
    const auto model = metrics[i].find("model_tflops");
    const auto hardware = metrics[i].find("hardware_tflops");
    if (model == metrics[i].end() || hardware == metrics[i].end() || !(model->second > 0)) continue;
    shares.push_back(hardware->second / model->second - 1);
  }
  return shares;
}

std::string median_text(const std::vector<double>& values, double scale, int digits,
                        const std::string& unit) {
  const std::optional<double> m = median(values);
  return m ? fixed(*m * scale, digits) + unit : "not logged";
}

void write_summary(const RunRecord& run, std::ostream& md) {
  const std::vector<MetricsLine>& metrics = run.metrics;
  const size_t from = steady_from(metrics);
  md << "## Summary\n\n| | last | best |\n|---|---|---|\n";
  md << "| loss | " << last_and_best(metrics, "loss") << " |\n";
  md << "| validation loss | " << last_and_best(metrics, "val_loss") << " |\n";
  for (const std::string& key : dataset_val_loss_keys(metrics))
    md << "| validation loss, " << key.substr(kDatasetValLoss.size()) << " | "
       << last_and_best(metrics, key) << " |\n";
  md << "\n";
  md << "| | median over steps " << fixed(metrics[from].at("step"), 0) << "–"
     << fixed(metrics.back().at("step"), 0) << " |\n|---|---|\n";
  md << "| tokens/s | " << median_text(column(metrics, "tokens_per_s", from), 1, 0, "") << " |\n";
  md << "| step time | " << median_text(column(metrics, "step_ms", from), 1, 1, " ms") << " |\n";
  const std::optional<double> measured = median(column(metrics, "step_ms", from));
  const std::optional<double> predicted = median(column(metrics, "predicted_step_ms", from));
  if (measured && predicted && *predicted > 0)
    md << "| predicted step time (error) | " << fixed(*predicted, 1) << " ms ("
       << (*predicted >= *measured ? "+" : "") << fixed(100 * (*predicted / *measured - 1), 1)
       << "%) |\n";
  md << "| model TFLOP/s per rank (MFU numerator) | "
     << median_text(column(metrics, "model_tflops", from), 1, 4, "") << " |\n";
  md << "| hardware TFLOP/s per rank (HFU numerator) | "
     << median_text(column(metrics, "hardware_tflops", from), 1, 4, "") << " |\n";
  for (const char* key : {"mfu", "hfu"}) {
    std::string name = key;
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    if (!column(metrics, key).empty())
      md << "| " << name << " | " << median_text(column(metrics, key, from), 100, 1, "%") << " |\n";
  }
  md << "| recompute FLOPs / model FLOPs | " << median_text(recompute_shares(metrics), 100, 1, "%")
     << " |\n\n";
}

// The largest value of `key` over the run, when any line holds it.
std::optional<double> run_max(const std::vector<MetricsLine>& metrics, const std::string& key) {
  const std::vector<double> values = column(metrics, key);
  if (values.empty()) return std::nullopt;
  return *std::max_element(values.begin(), values.end());
}

// The prediction of a category's peak over the run, when metrics.jsonl logs one
// (predicted_<category>_peak_bytes, as predicted_activation_peak_bytes).
std::optional<double> predicted_peak(const std::vector<MetricsLine>& metrics,
                                     const std::string& category) {
  return run_max(metrics, "predicted_" + category + "_peak_bytes");
}

std::string bytes_text(std::optional<double> bytes) {
  return bytes ? format_bytes(static_cast<int64_t>(*bytes)) : std::string("-");
}

std::string difference_text(std::optional<double> measured, std::optional<double> predicted) {
  if (!measured || !predicted) return "-";
  const double delta = *measured - *predicted;
  return delta == 0 ? "0" : (delta < 0 ? "−" : "+") + bytes_text(std::fabs(delta));
}

void write_memory(const RunRecord& run, std::ostream& md) {
  md << "## Memory (logging rank, peak over the run)\n\n"
     << "| category | measured | predicted | measured − predicted |\n|---|---:|---:|---:|\n";
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    const std::string name(runtime::category_name(c));
    const std::optional<double> measured = run_max(run.metrics, "peak_" + name + "_bytes");
    const std::optional<double> predicted = predicted_peak(run.metrics, name);
    if (!predicted && (!measured || *measured == 0)) continue;
    md << "| " << name << " | " << bytes_text(measured) << " | " << bytes_text(predicted) << " | "
       << difference_text(measured, predicted) << " |\n";
  }
  md << "\n";
}

// Per world rank, when the run had several: the activation peak against its prediction.
void write_rank_activations(const RunRecord& run, std::ostream& md) {
  const std::string measured_key = "rank_peak_activation_bytes";
  const std::string predicted_key = "rank_predicted_activation_peak_bytes";
  if (!run_max(run.metrics, element_key(measured_key, 1))) return;
  md << "Activation peak per rank (pipeline stages differ):\n\n"
     << "| rank | measured | predicted | measured − predicted |\n|---:|---:|---:|---:|\n";
  for (size_t rank = 0;; ++rank) {
    const std::optional<double> measured = run_max(run.metrics, element_key(measured_key, rank));
    if (!measured) break;
    const std::optional<double> predicted = run_max(run.metrics, element_key(predicted_key, rank));
    md << "| " << rank << " | " << bytes_text(measured) << " | " << bytes_text(predicted) << " | "
       << difference_text(measured, predicted) << " |\n";
  }
  md << "\n";
}

// Whether an event names `target`, as a key or as a value.
bool names(const RunEvent& event, const std::string& target) {
  return std::any_of(event.values.begin(), event.values.end(),
                     [&](const auto& kv) { return kv.first == target || kv.second == target; });
}

// "k=v, k=v", with the table separator escaped.
std::string values_text(const RunEvent& event) {
  std::string text;
  for (const auto& [key, value] : event.values)
    text += (text.empty() ? "" : ", ") + key + "=" + value;
  std::string escaped;
  for (char c : text) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

std::string miss_text(const RunEvent& event) {
  return "missed at step " + std::to_string(event.step) + " (" + values_text(event) + ")";
}

// Whether a `targets:` entry of config.yaml gates the run: config.yaml writes every key, the
// unset ones as 0 (max_loss as {at_step, value: 0}); the drift fraction only raises events.
bool is_gate(const std::string& key, const std::string& value) {
  if (key == "window" || key == "action" || key == "throughput_drift_fraction") return false;
  return key == "max_loss" ? !value.ends_with("value: 0") : value != "0";
}

void write_targets(const RunRecord& run, std::ostream& md) {
  md << "## Targets\n\n";
  std::vector<const RunEvent*> misses;
  for (const RunEvent& event : run.events)
    if (event.kind == "target_miss") misses.push_back(&event);
  const bool any_gate = std::any_of(run.targets.begin(), run.targets.end(),
                                    [](const auto& t) { return is_gate(t.first, t.second); });
  if (!any_gate && misses.empty()) {
    md << "None configured (config.yaml sets no `targets:` gate)"
       << (run.has_events_file ? "; no target_miss event.\n\n" : ".\n\n");
    return;
  }
  if (!run.has_events_file) md << "No events.jsonl: whether the targets were met is unknown.\n\n";
  md << "| target | configured | result |\n|---|---|---|\n";
  std::vector<bool> matched(misses.size(), false);
  for (const auto& [key, value] : run.targets) {
    if (!is_gate(key, value)) continue;
    std::vector<const RunEvent*> of_key;
    for (size_t i = 0; i < misses.size(); ++i) {
      if (!names(*misses[i], key)) continue;
      of_key.push_back(misses[i]);
      matched[i] = true;
    }
    std::string result = run.has_events_file ? "met" : "unknown";
    if (!of_key.empty()) result = miss_text(*of_key.front());
    if (of_key.size() > 1) result += "; " + std::to_string(of_key.size()) + " misses in all";
    std::string one_line = value;  // max_loss is a map: {at_step, value} on one row
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    md << "| " << key << " | " << one_line << " | " << result << " |\n";
  }
  for (size_t i = 0; i < misses.size(); ++i)
    if (!matched[i]) md << "| ? | - | " << miss_text(*misses[i]) << " |\n";
  md << "\n";
  for (const auto& [key, value] : run.targets)
    if (key == "window" || key == "action") md << "- " << key << ": " << value << "\n";
  md << "- target_miss events: " << misses.size() << "\n\n";
}

constexpr size_t kMaxEventRows = 200;  // a long run checkpoints thousands of times

void write_events(const RunRecord& run, std::ostream& md) {
  md << "## Events\n\n";
  if (!run.has_events_file) {
    md << "No events.jsonl in the run directory.\n\n";
    return;
  }
  std::map<std::string, int> counts;
  for (const RunEvent& event : run.events) ++counts[event.kind];
  for (const auto& [kind, count] : counts) md << "- " << kind << ": " << count << "\n";
  md << "\n| step | time | rank | event | values |\n|---:|---|---|---|---|\n";
  for (size_t i = 0; i < run.events.size() && i < kMaxEventRows; ++i) {
    const RunEvent& event = run.events[i];
    md << "| " << event.step << " | " << event.time << " | " << event.rank << " | " << event.kind
       << " | " << values_text(event) << " |\n";
  }
  if (run.events.size() > kMaxEventRows)
    md << "\n(the first " << kMaxEventRows << " of " << run.events.size() << " events)\n";
  md << "\n";
}

void write_plots(const RunRecord& run, const ReportPlots& plots, std::ostream& md) {
  md << "## Plots\n\n";
  if (plots.files.empty()) {
    md << "No plots: " << plots.missing_reason << "\n";
    return;
  }
  if (!run.events.empty())
    md << "Dotted vertical lines mark the events (the legends name their kinds).\n\n";
  for (const std::string& file : plots.files) {
    const std::string name = fs::path(file).stem().string();
    if (name == "timeline") {
      md << "The memory timeline of the step `train.memory_timeline_step` recorded: per rank, "
            "the bytes live by category after each allocator event (stacked), the meta "
            "replay's predicted total dashed over them, the schedule's forward and backward "
            "ops in the top strip and recompute as black ticks.\n\n";
    }
    md << "![" << name << "](" << file << ")\n\n";
  }
}

struct ProcessResult {
  int exit_code = 127;  // 127: could not start
  std::string output;   // stdout and stderr
};

// Runs argv[0] (looked up on PATH) with its output captured; no shell.
ProcessResult run_process(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw runtime::InputError("report: pipe() failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    std::vector<char*> c_argv;
    for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    ::execvp(c_argv[0], c_argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  ProcessResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;)
    result.output.append(buffer, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  return result;
}

// The interpreter for plot.py: --python, else the first candidate that imports matplotlib
// (a python3 first on PATH, as pyenv's, may lack Debian's python3-matplotlib).
std::optional<std::string> find_python(const ReportArgs& args) {
  std::vector<std::string> candidates = {"python3", "/usr/bin/python3"};
  if (!args.python.empty()) candidates = {args.python};
  for (const std::string& python : candidates)
    if (run_process({python, "-c", "import matplotlib"}).exit_code == 0) return python;
  return std::nullopt;
}

ReportPlots no_plots(const std::string& reason) {
  ReportPlots plots;
  plots.missing_reason = reason;
  return plots;
}

// Runs plot.py into <run dir>/plots; the files are the lines it printed. Throws InputError
// with plot.py's output when it fails.
ReportPlots draw_plots(const ReportArgs& args) {
  const std::string script = args.plot_script.empty() ? TRAINER_PLOT_SCRIPT : args.plot_script;
  if (!fs::exists(script))
    return no_plots("the plot script " + script + " does not exist (--plot-script).");
  const std::optional<std::string> python = find_python(args);
  if (!python) {
    return no_plots((args.python.empty()
                         ? std::string("no python3 with matplotlib (tried python3, "
                                       "/usr/bin/python3)")
                         : "--python " + args.python + " cannot import matplotlib") +
                    "; Debian: apt-get install python3-matplotlib.");
  }
  const std::string out_dir = args.run_dir + "/plots";
  const ProcessResult plot = run_process({*python, script, "run", args.run_dir, "--out", out_dir});
  if (plot.exit_code != 0) {
    throw runtime::InputError(script + " failed (exit " + std::to_string(plot.exit_code) + "):\n" +
                              plot.output);
  }
  ReportPlots plots;
  std::istringstream lines(plot.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 4 && line.substr(line.size() - 4) == ".png")
      plots.files.push_back(fs::relative(line, args.run_dir).string());
  }
  if (plots.files.empty()) plots.missing_reason = script + " wrote no PNG file.";
  return plots;
}

}  // namespace

std::string report_markdown(const RunRecord& run, const ReportPlots& plots) {
  std::ostringstream md;
  const std::vector<MetricsLine>& metrics = run.metrics;
  md << "# Run report: " << fs::path(run.dir).filename().string() << "\n\n"
     << "Steps " << fixed(metrics.front().at("step"), 0) << "–"
     << fixed(metrics.back().at("step"), 0) << " (" << metrics.size() << " lines of metrics.jsonl, "
     << (run.has_events_file ? std::to_string(run.events.size()) + " events" : "no events.jsonl")
     << "), from `" << run.dir << "`. Written by `trainer report`.\n\n";
  write_summary(run, md);
  write_memory(run, md);
  write_rank_activations(run, md);
  write_targets(run, md);
  write_events(run, md);
  write_plots(run, plots, md);
  return md.str();
}

int run_report(const ReportArgs& args, std::ostream& log) {
  const RunRecord run = read_run(args.run_dir);
  ReportPlots plots;
  int exit_code = 0;
  try {
    plots = draw_plots(args);
  } catch (const runtime::InputError& error) {
    plots = no_plots(std::string("plot.py failed: ") + error.what());
    std::fprintf(stderr, "error: %s\n", error.what());
    exit_code = 1;
  }
  const std::string path = args.run_dir + "/report.md";
  std::ofstream out(path, std::ios::trunc);
  out << report_markdown(run, plots);
  out.flush();
  if (!out) throw runtime::InputError("report: cannot write " + path);
  log << "wrote " << path << " (" << plots.files.size() << " plots"
      << (plots.files.empty() ? ": " + plots.missing_reason : std::string()) << ")\n";
  return exit_code;
}

}  // namespace trainer
