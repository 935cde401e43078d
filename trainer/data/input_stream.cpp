// InputStream for plain files (stdio), gzip (zlib's gz* interface, which also checks the CRC
// and length) and Zstandard (streaming decompression); and LineSplitter.
// Rules: a .zst whose last frame is incomplete at end of file is "truncated", never silent.
#include "trainer/data/input_stream.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace trainer {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::FILE* open_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw runtime::InputError(TRAINER_STR("prepare-data: --input \""
                                          << path << "\": cannot open: " << std::strerror(errno)));
  }
  return file;
}

class PlainStream : public InputStream {
 public:
  explicit PlainStream(const std::string& path) : path_(path), file_(open_file(path)) {}
  ~PlainStream() override { std::fclose(file_); }
  size_t read(char* buffer, size_t size) override {
    const size_t got = std::fread(buffer, 1, size, file_);
    if (got < size && std::ferror(file_)) {
      throw runtime::InputError(TRAINER_STR(path_ << ": read failed: " << std::strerror(errno)));
    }
    bytes_read_ += static_cast<int64_t>(got);
    return got;
  }
  int64_t file_bytes_read() const override { return bytes_read_; }

 private:
  std::string path_;
  std::FILE* file_;
  int64_t bytes_read_ = 0;
};

class GzipStream : public InputStream {
 public:
  explicit GzipStream(const std::string& path) : path_(path) {
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      throw runtime::InputError(
          TRAINER_STR("prepare-data: --input \"" << path << "\": cannot open"));
    }
    gzbuffer(file_, 1 << 18);
  }
  ~GzipStream() override { gzclose(file_); }
  size_t read(char* buffer, size_t size) override {
    const int got = gzread(file_, buffer, static_cast<unsigned>(std::min<size_t>(size, 1 << 30)));
    int error = Z_OK;
    const char* message = gzerror(file_, &error);
    if (got < 0 || (error != Z_OK && error != Z_STREAM_END)) {
      throw runtime::InputError(TRAINER_STR(
          path_ << ": corrupt or truncated gzip file ("
                << (error == Z_BUF_ERROR ? "it ends inside a compressed stream" : message) << ")"));
    }
    return static_cast<size_t>(got);
  }
  int64_t file_bytes_read() const override { return gzoffset(file_); }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

class ZstdStream : public InputStream {
 public:
  explicit ZstdStream(const std::string& path)
      : path_(path), file_(open_file(path)), input_(ZSTD_DStreamInSize()) {
    stream_ = ZSTD_createDStream();
    if (stream_ == nullptr)
      throw runtime::LibraryError("zstd: cannot create a decompression stream");
  }
  ~ZstdStream() override {
    ZSTD_freeDStream(stream_);
    std::fclose(file_);
  }
  size_t read(char* buffer, size_t size) override {
    ZSTD_outBuffer output{buffer, size, 0};
    while (output.pos == 0) {
      if (in_.pos == in_.size) {
        const size_t got = std::fread(input_.data(), 1, input_.size(), file_);
        if (got == 0) {
          if (std::ferror(file_)) {
            throw runtime::InputError(
                TRAINER_STR(path_ << ": read failed: " << std::strerror(errno)));
          }
          if (frame_open_) {
            throw runtime::InputError(
                TRAINER_STR(path_ << ": truncated Zstandard file (it ends inside a frame, after "
                                  << bytes_read_ << " bytes)"));
          }
          return 0;
        }
        bytes_read_ += static_cast<int64_t>(got);
        in_ = ZSTD_inBuffer{input_.data(), got, 0};
      }
      const size_t result = ZSTD_decompressStream(stream_, &output, &in_);
      if (ZSTD_isError(result)) {
        throw runtime::InputError(
            TRAINER_STR(path_ << ": corrupt Zstandard file: " << ZSTD_getErrorName(result)));
      }
      frame_open_ = result != 0;  // 0: a frame just ended
    }
    return output.pos;
  }
  int64_t file_bytes_read() const override { return bytes_read_; }

 private:
  std::string path_;
  std::FILE* file_;
  ZSTD_DStream* stream_ = nullptr;
  std::vector<char> input_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool frame_open_ = false;
  int64_t bytes_read_ = 0;
};

std::string without_compression_suffix(const std::string& path) {
  for (const std::string_view suffix : {".gz", ".zst"}) {
    if (ends_with(path, suffix)) return path.substr(0, path.size() - suffix.size());
  }
  return path;
}

}  // namespace

bool is_json_lines_path(const std::string& path) {
  const std::string base = without_compression_suffix(path);
  return ends_with(base, ".jsonl") || ends_with(base, ".json");
}

std::unique_ptr<InputStream> InputStream::open(const std::string& path) {
  if (ends_with(path, ".gz")) return std::make_unique<GzipStream>(path);
  if (ends_with(path, ".zst")) return std::make_unique<ZstdStream>(path);
  return std::make_unique<PlainStream>(path);
}

std::string read_all(InputStream& stream) {
  std::string content;
  size_t filled = 0;
  for (;;) {
    content.resize(std::max<size_t>(filled * 2, size_t{1} << 16));
    const size_t got = stream.read(content.data() + filled, content.size() - filled);
    if (got == 0) break;
    filled += got;
  }
  content.resize(filled);
  return content;
}

bool LineSplitter::next(std::string_view* line, int64_t* line_number) {
  for (;;) {
    const size_t newline = buffer_.find('\n', std::max(position_, searched_));
    if (newline != std::string::npos) {
      *line = std::string_view(buffer_).substr(position_, newline - position_);
      position_ = newline + 1;
      searched_ = position_;
      *line_number = ++line_number_;
      return true;
    }
    if (at_end_) {
      if (position_ >= buffer_.size()) return false;
      *line = std::string_view(buffer_).substr(position_);
      position_ = buffer_.size();
      *line_number = ++line_number_;
      return true;
    }
    buffer_.erase(0, position_);  // keep the partial line, read more after it
    position_ = 0;
    const size_t kept = buffer_.size();
    searched_ = kept;
    buffer_.resize(kept + kChunkBytes);
    const size_t got = stream_.read(buffer_.data() + kept, kChunkBytes);
    buffer_.resize(kept + got);
    at_end_ = got == 0;
  }
}

}  // namespace trainer
