// An input file of `trainer prepare-data` as a stream of bytes: plain, gzip (`.gz`, zlib) or
// Zstandard (`.zst`), chosen by extension; and the line splitter over it. Rules: a corrupt or
// truncated compressed file is an InputError naming the file; nothing is read ahead of need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace trainer {

// Whether the path is JSON Lines: `.jsonl` or `.json`, before any `.gz` / `.zst`.
bool is_json_lines_path(const std::string& path);

class InputStream {
 public:
  // Opens path; InputError when it cannot be opened.
  static std::unique_ptr<InputStream> open(const std::string& path);
  virtual ~InputStream() = default;
  // Up to size decompressed bytes; 0 at the end. InputError on a corrupt or truncated file.
  virtual size_t read(char* buffer, size_t size) = 0;
  // Bytes of the file itself consumed so far (compressed bytes for .gz / .zst): progress.
  virtual int64_t file_bytes_read() const = 0;
};

// The whole decompressed content.
std::string read_all(InputStream& stream);

// Splits a stream into lines at '\n' (dropped; a '\r' before it is kept). The last line needs
// no '\n'. A view stays valid until the next call.
class LineSplitter {
 public:
  explicit LineSplitter(InputStream& stream) : stream_(stream) {}
  // False at the end; *line_number counts from 1.
  bool next(std::string_view* line, int64_t* line_number);

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  InputStream& stream_;
  std::string buffer_;
  size_t position_ = 0;  // start of the next line in buffer_
  size_t searched_ = 0;  // buffer_[position_, searched_) holds no '\n'
  bool at_end_ = false;
  int64_t line_number_ = 0;
};

}  // namespace trainer
