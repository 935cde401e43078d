// The TensorBoard event files of a run: the step's scalars as an Event, and the files' history
// across resume and rewind (tensorboard.h).
#include "trainer/observe/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>

#include "runtime/error.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// <dir>/events.out.tfevents.<unix time>.<hostname>, or with ".1", ".2", ... when taken (a
// rewind or a resume within the same second).
std::string new_event_file_name(const std::string& dir) {
  const auto seconds = static_cast<int64_t>(unix_seconds_now());
  const std::string base =
      dir + "/" + kEventFilePrefix + std::to_string(seconds) + "." + hostname();
  std::string name = base;
  for (int suffix = 1; fs::exists(name); ++suffix) name = base + "." + std::to_string(suffix);
  return name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw runtime::InputError("cannot read event file " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::vector<tfrecord::ScalarValue> tensorboard_scalars(const StepMetrics& m) {
  auto f = [](double value) { return static_cast<float>(value); };
  std::vector<tfrecord::ScalarValue> values = {
      {"train/loss", f(m.loss)},
      {"train/lr", f(m.lr)},
      {"train/grad_norm", f(m.grad_norm)},
      {"train/tokens_per_s", f(m.tokens_per_s)},
      {"train/step_ms", f(m.step_ms)},
      {"train/mfu_percent", f(m.mfu_percent)},
      {"train/hfu_percent", f(m.hfu_percent)},
      {"train/recompute_share", f(m.recompute_share)},
      {"train/grad_reduce_wait_ms", f(m.grad_reduce_wait_ms)},
      {"train/grad_reduce_in_backward_ms", f(m.grad_reduce_in_backward_ms)},
      {"comm/bytes", f(static_cast<double>(m.comm_bytes))},
      {"comm/predicted_bytes", f(static_cast<double>(m.predicted_comm_bytes))},
  };
  for (runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    const std::string name(runtime::category_name(c));
    values.push_back({"memory/" + name + "_peak_bytes", f(static_cast<double>(m.memory[c].peak))});
    values.push_back({"memory/predicted_" + name + "_peak_bytes",
                      f(static_cast<double>(m.predicted_memory[static_cast<size_t>(c)]))});
  }
  if (m.val_loss) values.push_back({"val/loss", f(*m.val_loss)});
  for (const auto& [name, loss] : m.dataset_val_losses)
    values.push_back({"val/loss/" + name, f(loss)});
  return values;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir,
                                     std::optional<int64_t> keep_through_step) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw runtime::InputError("cannot create " + dir + ": " + error.message());
  if (keep_through_step) {
    keep_events_through_step(dir, *keep_through_step);
  } else {
    for (const std::string& old : event_files(dir)) fs::remove(old);
  }
  path_ = new_event_file_name(dir);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw runtime::InputError("cannot write event file " + path_);
  write_record(tfrecord::encode_file_version_event(unix_seconds_now(), "brain.Event:2"));
}

void TensorBoardWriter::write(const StepMetrics& metrics) {
  write_record(tfrecord::encode_scalars_event(unix_seconds_now(), metrics.step,
                                              tensorboard_scalars(metrics)));
}

void TensorBoardWriter::write_record(const std::string& event) {
  out_ << tfrecord::frame_record(event);
  out_.flush();
  if (!out_) throw runtime::InputError("write failed on event file " + path_);
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.starts_with(kEventFilePrefix))
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void keep_events_through_step(const std::string& dir, int64_t step) {
  for (const std::string& path : event_files(dir)) {
    std::string kept;
    for (const std::string& event : tfrecord::read_records(read_file(path)))
      if (tfrecord::event_step(event) <= step) kept += tfrecord::frame_record(event);
    // Not named like an event file, so a crash here leaves nothing TensorBoard would read.
    const std::string temporary =
        dir + "/.rewriting." + fs::path(path).filename().string() + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out << kept;
      out.flush();
      if (!out)
        throw runtime::InputError("cannot rewrite " + path + " (through " + temporary + ")");
    }
    fs::rename(temporary, path);
  }
}

}  // namespace trainer
