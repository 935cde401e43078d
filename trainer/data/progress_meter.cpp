// ProgressMeter: a '\r'-rewritten line every 0.25 s on a terminal, a plain line every 5 s
// otherwise. Rules: rates use the decompressed text bytes; the ETA uses file bytes.
#include "trainer/data/progress_meter.h"

#include <unistd.h>

#include <cstdio>

namespace trainer {
namespace {

constexpr double kTerminalIntervalSeconds = 0.25;
constexpr double kLogIntervalSeconds = 5.0;
constexpr double kBytesPerMegabyte = 1e6;

}  // namespace

ProgressMeter::ProgressMeter(int64_t total_file_bytes)
    : total_file_bytes_(total_file_bytes),
      terminal_(isatty(STDERR_FILENO) == 1),
      start_(Clock::now()),
      last_print_(start_) {}

ProgressMeter::~ProgressMeter() {
  if (terminal_ && printed_ && !finished_) std::fputc('\n', stderr);
}

void ProgressMeter::update(int64_t documents, int64_t text_bytes, int64_t file_bytes) {
  documents_ = documents, text_bytes_ = text_bytes, file_bytes_ = file_bytes;
  const Clock::time_point now = Clock::now();
  const double since_print = std::chrono::duration<double>(now - last_print_).count();
  if (since_print < (terminal_ ? kTerminalIntervalSeconds : kLogIntervalSeconds)) return;
  last_print_ = now;
  print(documents, text_bytes, file_bytes, false);
}

void ProgressMeter::finish() {
  finished_ = true;
  if (terminal_ && printed_) {
    print(documents_, text_bytes_, file_bytes_, true);
    std::fputc('\n', stderr);
  }
}

void ProgressMeter::print(int64_t documents, int64_t text_bytes, int64_t file_bytes,
                          bool final_line) {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const double megabytes = static_cast<double>(text_bytes) / kBytesPerMegabyte;
  const double rate = seconds > 0 ? megabytes / seconds : 0;
  char eta[64] = "";
  if (!final_line && total_file_bytes_ > 0 && file_bytes > 0) {
    const double remaining = seconds * static_cast<double>(total_file_bytes_ - file_bytes) /
                             static_cast<double>(file_bytes);
    std::snprintf(eta, sizeof eta, ", %.0f%%, ETA %.0f s",
                  100.0 * static_cast<double>(file_bytes) / static_cast<double>(total_file_bytes_),
                  remaining > 0 ? remaining : 0.0);
  }
  std::fprintf(stderr, "%sprepare-data: %lld documents, %.1f MB, %.1f MB/s%s%s",
               terminal_ ? "\r" : "", static_cast<long long>(documents), megabytes, rate, eta,
               terminal_ ? "\033[K" : "\n");
  std::fflush(stderr);
  printed_ = true;
}

}  // namespace trainer
