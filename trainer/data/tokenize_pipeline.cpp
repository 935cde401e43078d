// tokenize_inputs: the main thread reads and batches documents, worker threads tokenize whole
// batches, and the main thread writes the results strictly in batch order (Note [Order-preserving
// batches]). Rules: each worker owns one tokenizer session; a worker's exception is rethrown on
// the main thread when its batch's turn to be written comes.
#include "trainer/data/tokenize_pipeline.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/error.h"
#include "trainer/data/input_stream.h"
#include "trainer/data/json_lines.h"
#include "trainer/data/progress_meter.h"
#include "trainer/tokenizer/split_pattern.h"

namespace trainer {
namespace {

// Note [Order-preserving batches]: documents are cut into batches of about kBatchBytes in input
// order and numbered; any worker may tokenize any batch, but batch k is written only after batch
// k - 1, so the .bin/.idx bytes do not depend on the worker count or on timing. At most
// kBatchesInFlightPerWorker batches per worker wait, which bounds memory.
constexpr size_t kBatchBytes = size_t{1} << 20;
constexpr size_t kBatchMaxDocuments = 8192;
constexpr size_t kBatchesInFlightPerWorker = 4;

struct Batch {
  size_t file_index = 0;
  bool json = false;
  std::string bytes;         // the documents' raw bytes (lines or a whole file), back to back
  std::vector<size_t> ends;  // end of record i in bytes
  std::vector<int64_t> line_numbers;  // line of record i; 0 for a whole-file document
  int64_t file_bytes = 0;             // input file bytes consumed when the batch was cut (progress)

  void add(std::string_view record, int64_t line_number) {
    bytes.append(record);
    ends.push_back(bytes.size());
    line_numbers.push_back(line_number);
  }
  bool full() const { return bytes.size() >= kBatchBytes || ends.size() >= kBatchMaxDocuments; }
};

struct BatchResult {
  std::vector<int32_t> tokens;  // every document's tokens, back to back
  std::vector<size_t> lengths;  // tokens per document
  int64_t text_bytes = 0;
  int64_t bad_lines = 0;
  std::string first_bad_line;  // the first skipped line's error
  int64_t file_bytes = 0;
};

class BatchTokenizer {
 public:
  BatchTokenizer(const tokenizer::Tokenizer& tokenizer, const TokenizeOptions& options)
      : tokenizer_(tokenizer), options_(options), session_(tokenizer.new_session()) {}

  BatchResult run(const Batch& batch) {
    BatchResult result;
    result.file_bytes = batch.file_bytes;
    const std::string& path = options_.inputs[batch.file_index];
    std::string decoded, reason;
    size_t start = 0;
    for (size_t i = 0; i < batch.ends.size(); ++i) {
      std::string_view text(batch.bytes.data() + start, batch.ends[i] - start);
      start = batch.ends[i];
      const int64_t line = batch.line_numbers[i];
      auto bad = [&](const std::string& why) {
        const std::string where =
            line > 0 ? TRAINER_STR(path << " line " << line) : std::string(path);
        if (!options_.skip_bad_lines) {
          throw runtime::InputError(TRAINER_STR(
              "prepare-data: " << where << ": " << why << " (--skip-bad-lines skips it)"));
        }
        if (result.bad_lines++ == 0) result.first_bad_line = where + ": " + why;
      };
      if (batch.json) {
        if (!document_of_json_line(text, options_.json_key, &decoded, &reason)) {
          bad(reason);
          continue;
        }
        text = decoded;
      }
      if (tokenizer_.requires_utf8()) {
        if (const size_t offset = tokenizer::find_invalid_utf8(text); offset != std::string::npos) {
          bad(TRAINER_STR("invalid UTF-8 at byte " << offset << " of the document"));
          continue;
        }
      }
      const size_t before = result.tokens.size();
      session_->encode(text, &result.tokens);
      if (options_.append_eod) result.tokens.push_back(*tokenizer_.identity().eod_id);
      result.lengths.push_back(result.tokens.size() - before);
      result.text_bytes += static_cast<int64_t>(text.size());
    }
    return result;
  }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  const TokenizeOptions& options_;
  std::unique_ptr<tokenizer::TokenizerSession> session_;
};

// Worker threads taking numbered batches; results come back in number order.
class OrderedBatchPool {
 public:
  OrderedBatchPool(const tokenizer::Tokenizer& tokenizer, const TokenizeOptions& options) {
    for (int i = 0; i < options.workers; ++i) {
      workers_.emplace_back(
          [this, &tokenizer, &options] { work(BatchTokenizer(tokenizer, options)); });
    }
  }
  ~OrderedBatchPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }
  OrderedBatchPool(const OrderedBatchPool&) = delete;
  OrderedBatchPool& operator=(const OrderedBatchPool&) = delete;

  void submit(Batch batch) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.emplace_back(next_submitted_++, std::move(batch));
    }
    work_ready_.notify_one();
  }
  size_t in_flight() const { return next_submitted_ - next_taken_; }
  // The next batch's result in order; rethrows its worker's exception.
  BatchResult take_next() {
    std::unique_lock<std::mutex> lock(mutex_);
    result_ready_.wait(lock, [&] { return done_.count(next_taken_) > 0; });
    auto node = done_.extract(next_taken_++);
    lock.unlock();
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    return std::move(node.mapped().result);
  }

 private:
  struct Outcome {
    BatchResult result;
    std::exception_ptr error;
  };

  void work(BatchTokenizer batch_tokenizer) {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // an error unwound the main thread: queued batches are dropped
      auto [number, batch] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      Outcome outcome;
      try {
        outcome.result = batch_tokenizer.run(batch);
      } catch (...) {
        outcome.error = std::current_exception();
      }
      lock.lock();
      done_.emplace(number, std::move(outcome));
      lock.unlock();
      result_ready_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_ready_, result_ready_;
  std::deque<std::pair<size_t, Batch>> queue_;
  std::map<size_t, Outcome> done_;
  size_t next_submitted_ = 0;  // main thread only
  size_t next_taken_ = 0;      // main thread only
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

int64_t total_file_bytes(const std::vector<std::string>& paths) {
  int64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (!error) total += static_cast<int64_t>(size);
  }
  return total;
}

}  // namespace

TokenizeCounts tokenize_inputs(const tokenizer::Tokenizer& tokenizer,
                               const TokenizeOptions& options, IndexedDatasetWriter& writer) {
  TokenizeCounts counts;
  std::string first_bad_line;
  ProgressMeter progress(total_file_bytes(options.inputs));
  OrderedBatchPool pool(tokenizer, options);
  auto write_next = [&] {
    const BatchResult result = pool.take_next();
    size_t start = 0;
    for (const size_t length : result.lengths) {
      writer.add_document(std::span<const int32_t>(result.tokens.data() + start, length));
      start += length;
    }
    counts.documents += static_cast<int64_t>(result.lengths.size());
    counts.tokens += static_cast<int64_t>(result.tokens.size());
    counts.text_bytes += result.text_bytes;
    if (counts.bad_lines == 0 && result.bad_lines > 0) first_bad_line = result.first_bad_line;
    counts.bad_lines += result.bad_lines;
    if (options.show_progress)
      progress.update(counts.documents, counts.text_bytes, result.file_bytes);
  };
  const size_t max_in_flight = kBatchesInFlightPerWorker * static_cast<size_t>(options.workers);
  auto submit = [&](Batch& batch) {
    if (batch.ends.empty()) return;
    pool.submit(std::move(batch));
    while (pool.in_flight() >= max_in_flight) write_next();
  };

  int64_t file_bytes_before = 0;  // of the files already read
  for (size_t file_index = 0; file_index < options.inputs.size(); ++file_index) {
    const std::string& path = options.inputs[file_index];
    const std::unique_ptr<InputStream> stream = InputStream::open(path);
    auto new_batch = [&] {
      Batch batch;
      batch.file_index = file_index;
      batch.json = is_json_lines_path(path);
      return batch;
    };
    Batch batch = new_batch();
    if (!batch.json && !options.split_lines) {
      batch.add(read_all(*stream), 0);  // the whole file is one document
    } else {
      LineSplitter lines(*stream);
      std::string_view line;
      int64_t line_number = 0;
      while (lines.next(&line, &line_number)) {
        if (batch.json ? is_blank_line(line) : line.empty()) continue;
        batch.add(line, line_number);
        if (batch.full()) {
          batch.file_bytes = file_bytes_before + stream->file_bytes_read();
          submit(batch);
          batch = new_batch();
        }
      }
    }
    file_bytes_before += stream->file_bytes_read();
    batch.file_bytes = file_bytes_before;
    submit(batch);
  }
  while (pool.in_flight() > 0) write_next();
  if (options.show_progress) progress.finish();
  if (counts.bad_lines > 0) {
    std::fprintf(stderr, "prepare-data: skipped %lld bad lines; the first: %s\n",
                 static_cast<long long>(counts.bad_lines), first_bad_line.c_str());
  }
  return counts;
}

}  // namespace trainer
