// The sweep: per value, presets and the planner summarised by trainer/planning/auto_plan.h; the
// frontier plans under budgets spread evenly from the least-memory preset's peak to no recompute's.
// JSON and CSV are written whole to temporary files, then renamed.
#include "trainer/planning/plan_sweep.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>

#include "runtime/error.h"
#include "trainer/config/config.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/util/atomic_file.h"
#include "trainer/util/format_bytes.h"

namespace trainer {
namespace {

constexpr int kFrontierPoints = 12;

struct Preset {
  const char* name;
  recompute::RecomputePreset preset;
};

// The three columns of every row, then the frontier's extra presets (Megatron's choices).
const std::vector<Preset>& presets() {
  using model::RecomputeMode;
  using recompute::Method;
  const model::SelectiveModules all{.core_attn = true, .act = true, .layernorm = true, .mlp = true};
  static const std::vector<Preset> list = {
      {"none", {}},
      {"selective", {RecomputeMode::selective, {}, {}, model::SelectiveModules{.core_attn = true}}},
      {"full", {RecomputeMode::full, Method::uniform, 1, {}}},
      {"selective all", {RecomputeMode::selective, {}, {}, all}},
      {"full uniform 2", {RecomputeMode::full, Method::uniform, 2, {}}},
      {"full block 1", {RecomputeMode::full, Method::block, 1, {}}},
  };
  return list;
}
constexpr size_t kColumns = 3;  // none, selective, full

struct Point {
  std::string name;
  int64_t peak = 0;
  double share = 0;
};

struct Row {
  std::string value;
  std::vector<Point> columns;    // none, selective, full
  std::optional<Point> planned;  // with a budget, when a plan fits
  std::vector<Point> frontier;   // (budget in name) planner points
  std::vector<Point> presets;    // every preset that applies
  std::vector<int64_t> frontier_budgets;
};

// The config under one preset in place of its recompute section; none when the preset does not
// apply (a group larger than a model chunk).
std::optional<Point> summarize_preset(const Config& base, const Preset& preset) {
  try {
    Config config = base;
    config.recompute = {};
    config.recompute.preset = preset.preset;
    recompute::validate_recompute(
        config.recompute, config.model.num_layers,
        parallel::stage_layer_chunks(config.parallel, config.model.num_layers));
    const PlanSummary s = summarize_plan(config);
    return Point{preset.name, s.peak, s.recompute_share};
  } catch (const runtime::ConfigError&) {
    return std::nullopt;
  }
}

std::optional<Point> summarize_planned(const Config& config, int64_t budget,
                                       const PlanPricing& pricing) {
  try {
    Config planned = config;
    planned.recompute = plan_under_budget(config, budget, pricing).recompute;
    const PlanSummary s = summarize_plan(planned);
    return Point{"planned", s.peak, s.recompute_share};
  } catch (const runtime::ConfigError&) {
    return std::nullopt;  // nothing fits
  }
}

Row sweep_row(const SweepArgs& args, const std::string& key, const std::string& value) {
  Row row;
  row.value = value;
  std::vector<std::string> overrides = args.overrides;
  overrides.push_back(key + "=" + value);
  const Config config = load_config(args.config_path, overrides, ConfigUse::plan);
  for (size_t p = 0; p < presets().size(); ++p) {
    const std::optional<Point> point = summarize_preset(config, presets()[p]);
    if (p < kColumns) {
      if (!point)
        throw runtime::ConfigError(
            key, "the " + std::string(presets()[p].name) + " preset does not apply at " + value);
      row.columns.push_back(*point);
    }
    if (point) row.presets.push_back(*point);
  }
  const std::optional<CostModel> costs = objective_costs(config);
  const PlanPricing pricing{costs ? &*costs : nullptr, default_links(config)};
  const int64_t budget = budget_bytes(config.train.memory_budget_gib);
  if (budget > 0) row.planned = summarize_planned(config, budget, pricing);
  int64_t low = row.columns[0].peak, high = row.columns[0].peak;
  for (const Point& p : row.presets) low = std::min(low, p.peak);
  // Budgets spread evenly, and each preset's own total (the planner beside it at its memory).
  std::vector<int64_t> budgets;
  for (int i = 0; i < kFrontierPoints; ++i)
    budgets.push_back(low + (high - low) * i / (kFrontierPoints - 1));
  for (const Point& p : row.presets) budgets.push_back(p.peak);
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  for (const int64_t b : budgets) {
    if (const std::optional<Point> point = summarize_planned(config, b, pricing)) {
      row.frontier.push_back(*point);
      row.frontier_budgets.push_back(b);
    }
  }
  return row;
}

std::string json_point_fields(const std::optional<Point>& p, bool share) {
  if (!p) return "null";
  char text[64];
  if (share) {
    std::snprintf(text, sizeof text, "%.6f", p->share);
  } else {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(p->peak));
  }
  return text;
}

// One of the row's maps {"none": x, "selective": x, "full": x, "planned": x}.
// Whether a plan exists and its total is within the budget (any, without one).
bool fits(const std::optional<Point>& p, int64_t budget) {
  return p && (budget <= 0 || p->peak <= budget);
}

// kind 0: peak bytes, 1: recompute share, 2: whether it fits the budget.
std::string json_map(const Row& row, int kind, int64_t budget) {
  std::ostringstream out;
  out << "{";
  for (size_t c = 0; c <= kColumns; ++c) {
    const std::optional<Point> p =
        c < kColumns ? std::optional<Point>(row.columns[c]) : row.planned;
    const char* name = c < kColumns ? presets()[c].name : "planned";
    out << (c ? ", " : "") << "\"" << name << "\": ";
    if (kind == 2) {
      out << (fits(p, budget) ? "true" : "false");
    } else {
      out << json_point_fields(p, kind == 1);
    }
  }
  out << "}";
  return out.str();
}

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

void write_json(const std::string& path, const SweepArgs& args, const std::string& key,
                int64_t budget, const std::vector<Row>& rows) {
  std::ostringstream out;
  out << "{\"config\": " << json_string(args.config_path) << ", \"key\": " << json_string(key)
      << ", \"budget_bytes\": " << (budget > 0 ? std::to_string(budget) : "null")
      << ",\n \"rows\": [";
  for (size_t r = 0; r < rows.size(); ++r) {
    out << (r ? ",\n  " : "\n  ") << "{\"value\": " << json_string(rows[r].value)
        << ", \"peak_bytes\": " << json_map(rows[r], 0, budget)
        << ", \"recompute_share\": " << json_map(rows[r], 1, budget)
        << ", \"fits\": " << json_map(rows[r], 2, budget) << "}";
  }
  out << "],\n \"frontier\": [";
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    out << (r ? ",\n  " : "\n  ") << "{\"value\": " << json_string(row.value) << ", \"points\": [";
    for (size_t i = 0; i < row.frontier.size(); ++i) {
      out << (i ? ", " : "") << "{\"budget_bytes\": " << row.frontier_budgets[i]
          << ", \"peak_bytes\": " << row.frontier[i].peak
          << ", \"recompute_share\": " << json_point_fields(row.frontier[i], true) << "}";
    }
    out << "], \"presets\": [";
    for (size_t i = 0; i < row.presets.size(); ++i) {
      out << (i ? ", " : "") << "{\"name\": " << json_string(row.presets[i].name)
          << ", \"peak_bytes\": " << row.presets[i].peak
          << ", \"recompute_share\": " << json_point_fields(row.presets[i], true) << "}";
    }
    out << "]}";
  }
  out << "]}\n";
  write_file_atomically(path, out.str());
}

void write_csv(const std::string& path, int64_t budget, const std::vector<Row>& rows) {
  std::ostringstream out;
  out << "value";
  for (const char* what : {"peak_bytes", "recompute_share", "fits"})
    for (const char* plan : {"none", "selective", "full", "planned"})
      out << "," << plan << "_" << what;
  out << "\n";
  for (const Row& row : rows) {
    out << row.value;
    for (int kind = 0; kind < 3; ++kind) {
      for (size_t c = 0; c <= kColumns; ++c) {
        const std::optional<Point> p =
            c < kColumns ? std::optional<Point>(row.columns[c]) : row.planned;
        if (kind == 2) {
          out << "," << (fits(p, budget) ? "true" : "false");
        } else {
          out << "," << (p ? json_point_fields(p, kind == 1) : "");
        }
      }
    }
    out << "\n";
  }
  write_file_atomically(path, out.str());
}

}  // namespace

void run_plan_sweep(const SweepArgs& args, std::ostream& out) {
  const size_t equals = args.sweep.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == args.sweep.size()) {
    throw runtime::InputError(
        "plan: --sweep needs KEY=v1,v2,... (e.g. model.seq_length=1024,2048)"
        ", got '" +
        args.sweep + "'");
  }
  const std::string key = args.sweep.substr(0, equals);
  std::vector<std::string> values;
  std::stringstream list(args.sweep.substr(equals + 1));
  for (std::string v; std::getline(list, v, ',');)
    if (!v.empty()) values.push_back(v);
  std::vector<Row> rows;
  for (const std::string& v : values) rows.push_back(sweep_row(args, key, v));
  const Config base = load_config(args.config_path, args.overrides, ConfigUse::plan);
  const int64_t budget = budget_bytes(base.train.memory_budget_gib);
  char line[256];
  std::snprintf(line, sizeof line, "%16s | %12s | %12s | %12s | %12s | %s\n", key.c_str(), "none",
                "selective", "full", "planned", "planned recompute");
  out << "predicted peak per rank (largest of any rank)"
      << (budget > 0 ? "; * over the budget " + format_bytes(budget) : "") << "\n"
      << line;
  for (const Row& row : rows) {
    auto cell = [&](const std::optional<Point>& p) {
      if (!p) return std::string("no fit");
      return format_bytes(p->peak) + (budget > 0 && p->peak > budget ? "*" : " ");
    };
    std::snprintf(line, sizeof line, "%16s | %12s | %12s | %12s | %12s | %s\n", row.value.c_str(),
                  cell(row.columns[0]).c_str(), cell(row.columns[1]).c_str(),
                  cell(row.columns[2]).c_str(), cell(row.planned).c_str(),
                  row.planned
                      ? (std::to_string(100.0 * row.planned->share).substr(0, 5) + "%").c_str()
                      : "-");
    out << line;
  }
  write_json(args.out_prefix + ".json", args, key, budget, rows);
  write_csv(args.out_prefix + ".csv", budget, rows);
  out << "wrote " << args.out_prefix << ".json and " << args.out_prefix << ".csv\n";
}

}  // namespace trainer
