// The safetensors file format (https://github.com/huggingface/safetensors): u64 little-endian
// header length, a JSON header naming every tensor's dtype/shape/byte range, then the raw data.
// Writers replace files atomically (temp + fsync + rename); readers trust nothing and throw
// runtime::InputError naming the file and the defect.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

// One tensor: safetensors dtype name ("F32", "BF16", "I32", ...), shape, little-endian bytes.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // numel * itemsize bytes; empty after a header-only read
  // Where a header-only read left the bytes: the file and their offset in it (-1: in `data`).
  std::string file = {};
  int64_t file_offset = -1;
};

// Whether a reader loads the tensors' bytes or only checks and records where they are, for a
// reader that needs some tensors of a large checkpoint (each rank its own parameters).
enum class SafetensorsRead { whole, header };

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;      // the header's "__metadata__"
  std::map<std::string, SafetensorsEntry> tensors;  // by name
};

// Bytes per element of a safetensors dtype name, or 0 when the name is unknown.
int64_t safetensors_dtype_size(std::string_view dtype);

// Takes a tensor's bytes in order, in pieces of any size.
using SafetensorsSink = std::function<void(const void* bytes, size_t size)>;

// A tensor to write whose bytes are made when the writer reaches it: `write` (called once) gives
// the sink its numel * itemsize bytes, in pieces, so that a writer holds at most one tensor's
// bytes at a time (none, where they are already in memory).
struct SafetensorsSource {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::function<void(const SafetensorsSink& sink)> write;
};

// The order a writer lays `tensors` out in, as indices into it: HF's, larger item sizes first (so
// that every tensor stays aligned), then by name.
std::vector<size_t> safetensors_write_order(const std::vector<SafetensorsSource>& tensors);

// write_safetensors of tensors made one at a time as the file is written, in
// safetensors_write_order (a source that gives another byte count than its shape says is a caller
// bug; no file is left then).
void write_safetensors_streamed(const std::string& path,
                                const std::vector<SafetensorsSource>& tensors,
                                const std::map<std::string, std::string>& metadata);

// Writes `tensors` (unique names, data sized to dtype and shape: a caller bug otherwise) and
// `metadata` to `path` as HF does: header padded with spaces to a multiple of 8 bytes, data laid
// out by item size descending, then name, so every tensor is aligned to its item size.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata);

// "[a, b]", as the safetensors header writes shapes (error messages).
std::string safetensors_shape_text(const std::vector<int64_t>& shape);

// A tensor's values as f32: F32 as they are, BF16 and F16 widened exactly; read from its file
// after a header-only read. InputError naming the tensor for any other dtype, and naming the file
// when the bytes can no longer be read (the file shrank since its header was read).
// `begin`, `count`: only the elements [begin, begin + count) (count -1: to the end), read alone.
std::vector<float> safetensors_f32_values(const SafetensorsEntry& entry, int64_t begin = 0,
                                          int64_t count = -1);

// The rows [first_row, first_row + rows) of the columns [first_col, first_col + cols) of a 2-D
// tensor as safetensors_f32_values gives values, row after row (rows x cols): a block of whole
// rows in one read, a narrower one a read per row.
std::vector<float> safetensors_f32_block(const SafetensorsEntry& entry, int64_t first_row,
                                         int64_t rows, int64_t first_col, int64_t cols);

// InputError naming the tensor unless its dtype is F32, BF16 or F16 (what the values widen).
void check_float_dtype(const SafetensorsEntry& entry);

// Reads and validates a file: size >= 8, header length <= min(file size - 8, 100 MB), header is
// a JSON object, every entry has a known dtype, a shape and in-range data_offsets whose length
// matches the shape, no two entries overlap. `header`: the bytes stay in the file.
SafetensorsFile read_safetensors(const std::string& path,
                                 SafetensorsRead read = SafetensorsRead::whole);

// Writes a file as `<path>.tmp` and renames it onto `path` after fsync, so a reader sees the old
// file or the whole new one. Destroying an uncommitted writer removes the temp file. OS failures
// throw runtime::LibraryError naming the path.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* bytes, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();  // fsync, close, rename onto the final path, fsync the directory

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
};

// JSON text pieces shared by the safetensors header and config.json writers.
std::string json_number(float value);           // shortest text that round-trips as float

}  // namespace trainer
