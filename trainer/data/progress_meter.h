// Progress of `trainer prepare-data` on stderr: on a terminal one live line (documents, MB,
// MB/s, ETA when the input size is known), otherwise a plain line every few seconds.
// Rules: update() is cheap enough to call per batch; only the owning (main) thread calls it.
#pragma once

#include <chrono>
#include <cstdint>

namespace trainer {

class ProgressMeter {
 public:
  // total_file_bytes: the inputs' sizes on disk (0 when unknown: no ETA).
  explicit ProgressMeter(int64_t total_file_bytes);
  ~ProgressMeter();  // ends a live line left open (an error unwound the run)
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;
  // documents and text_bytes so far; file_bytes: input file bytes consumed so far.
  void update(int64_t documents, int64_t text_bytes, int64_t file_bytes);
  void finish();  // ends the live line

 private:
  using Clock = std::chrono::steady_clock;
  void print(int64_t documents, int64_t text_bytes, int64_t file_bytes, bool final_line);

  int64_t total_file_bytes_;
  bool terminal_;
  Clock::time_point start_;
  Clock::time_point last_print_;
  bool printed_ = false;
  bool finished_ = false;
  int64_t documents_ = 0, text_bytes_ = 0, file_bytes_ = 0;
};

}  // namespace trainer
