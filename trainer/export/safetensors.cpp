// safetensors reading (validate everything, then copy each tensor out) and writing (HF layout,
// atomic publish). yaml-cpp parses the JSON header; the writer builds JSON text by hand.
// Every reader error is runtime::InputError "<path>: <defect>".
#include "trainer/export/safetensors.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "runtime/error.h"
#include "runtime/tensor.h"
#include "trainer/export/json_object.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit of the reference implementation
constexpr size_t kHeaderAlignmentBytes = 8;

struct DTypeInfo {
  std::string_view name;
  int64_t size_bytes;
};

constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

// a * b, or -1 when either is negative or the product overflows int64.
int64_t checked_multiply(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return -1;
  return a * b;
}

// numel * itemsize, or -1 on overflow.
int64_t byte_size(const std::vector<int64_t>& shape, int64_t item_size) {
  int64_t bytes = item_size;
  for (int64_t dim : shape) {
    bytes = checked_multiply(bytes, dim);
    if (bytes < 0) return -1;
  }
  return bytes;
}

// ---- reading -------------------------------------------------------------------------------

// Parsed header entry before its bytes are read.
struct HeaderEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range in the data section
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, int64_t data_bytes)
      : path_(path), data_bytes_(data_bytes) {}

  [[noreturn]] void fail(const std::string& defect) const {
    throw runtime::InputError(path_ + ": " + defect);
  }

  // A JSON integer in [0, INT64_MAX]; `what` names the field in the error.
  int64_t count(const YAML::Node& node, const std::string& what) const {
    const bool plain = node.IsScalar() && node.Tag() == "?";  // quoted JSON strings have tag "!"
    const std::string& text = plain ? node.Scalar() : std::string();
    if (text.empty() || text.size() > 18 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      fail(what + " must be a non-negative integer (below 1e18)");
    return std::stoll(text);
  }

  HeaderEntry entry(const std::string& name, const YAML::Node& node) const {
    const std::string where = "tensor '" + name + "'";
    if (!node.IsMap()) fail(where + ": header entry is not a JSON object");
    HeaderEntry e;
    e.name = name;
    const YAML::Node dtype = node["dtype"], shape = node["shape"], offsets = node["data_offsets"];
    if (!dtype) fail(where + ": missing \"dtype\"");
    if (!shape) fail(where + ": missing \"shape\"");
    if (!offsets) fail(where + ": missing \"data_offsets\"");
    if (!dtype.IsScalar()) fail(where + ": \"dtype\" is not a string");
    e.dtype = dtype.Scalar();
    const int64_t item_size = safetensors_dtype_size(e.dtype);
    if (item_size == 0) fail(where + ": unknown dtype \"" + e.dtype + "\"");
    if (!shape.IsSequence()) fail(where + ": \"shape\" is not a list");
    for (size_t i = 0; i < shape.size(); ++i)
      e.shape.push_back(count(shape[i], where + ": shape[" + std::to_string(i) + "]"));
    if (!offsets.IsSequence() || offsets.size() != 2)
      fail(where + ": \"data_offsets\" must be a list [begin, end]");
    e.begin = count(offsets[0], where + ": data_offsets[0]");
    e.end = count(offsets[1], where + ": data_offsets[1]");
    if (e.begin > e.end || e.end > data_bytes_)
      fail(TRAINER_STR(where << ": data_offsets [" << e.begin << ", " << e.end
                             << "] out of range: the data section is " << data_bytes_ << " bytes"));
    const int64_t expected = byte_size(e.shape, item_size);
    if (expected < 0) fail(where + ": shape " + safetensors_shape_text(e.shape) + " overflows");
    if (e.end - e.begin != expected)
      fail(TRAINER_STR(where << ": size mismatch: data_offsets [" << e.begin << ", " << e.end
                             << "] hold " << e.end - e.begin << " bytes but " << e.dtype
                             << " shape " << safetensors_shape_text(e.shape) << " needs "
                             << expected));
    return e;
  }

  void metadata(const YAML::Node& node, std::map<std::string, std::string>& out) const {
    if (!node.IsMap()) fail("\"__metadata__\" is not a JSON object");
    for (const auto& item : node) {
      if (!item.second.IsScalar() || item.second.Tag() != "!")
        fail("\"__metadata__\" value of \"" + item.first.Scalar() + "\" is not a string");
      out[item.first.Scalar()] = item.second.Scalar();
    }
  }

  std::vector<HeaderEntry> parse(const std::string& header,
                                 std::map<std::string, std::string>& metadata_out) const {
    const YAML::Node root =
        load_json_object(header, path_, "header is not valid JSON", "it must be a JSON object");
    std::vector<HeaderEntry> entries;
    std::set<std::string> names;
    for (const auto& item : root) {
      if (!item.first.IsScalar()) fail("header has a key that is not a string");
      const std::string& name = item.first.Scalar();
      if (!names.insert(name).second) fail("duplicate header key \"" + name + "\"");
      if (name == "__metadata__") {
        metadata(item.second, metadata_out);
      } else {
        entries.push_back(entry(name, item.second));
      }
    }
    std::vector<const HeaderEntry*> by_offset;
    for (const HeaderEntry& e : entries)
      if (e.end > e.begin) by_offset.push_back(&e);  // empty tensors occupy no bytes
    std::sort(by_offset.begin(), by_offset.end(),
              [](const HeaderEntry* a, const HeaderEntry* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < by_offset.size(); ++i)
      if (by_offset[i]->begin < by_offset[i - 1]->end)
        fail(TRAINER_STR("tensors '" << by_offset[i - 1]->name << "' [" << by_offset[i - 1]->begin
                                     << ", " << by_offset[i - 1]->end << ") and '"
                                     << by_offset[i]->name << "' [" << by_offset[i]->begin << ", "
                                     << by_offset[i]->end << ") overlap"));
    return entries;
  }

 private:
  const std::string& path_;
  int64_t data_bytes_;
};

}  // namespace

int64_t safetensors_dtype_size(std::string_view dtype) {
  for (const DTypeInfo& info : kDTypes)
    if (info.name == dtype) return info.size_bytes;
  return 0;
}

SafetensorsFile read_safetensors(const std::string& path, SafetensorsRead read) {
  std::error_code status;
  if (!std::filesystem::is_regular_file(path, status))
    throw runtime::InputError(path + ": not a readable safetensors file" +
                              (status ? ": " + status.message() : std::string()));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw runtime::InputError(path + ": cannot open safetensors file: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const int64_t file_bytes = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  if (file_bytes < 8)
    throw runtime::InputError(TRAINER_STR(path << ": truncated: the file is " << file_bytes
                                               << " bytes, shorter than the 8-byte header length"));
  uint8_t length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | length_bytes[i];
  if (header_bytes > kMaxHeaderBytes)
    throw runtime::InputError(TRAINER_STR(path << ": header length " << header_bytes
                                               << " exceeds the limit of " << kMaxHeaderBytes
                                               << " bytes"));
  if (header_bytes > static_cast<uint64_t>(file_bytes - 8))
    throw runtime::InputError(TRAINER_STR(
        path << ": header length " << header_bytes << " goes beyond the end of the file ("
             << file_bytes - 8 << " bytes follow the length field)"));
  std::string header(header_bytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_bytes));
  if (!in) throw runtime::InputError(path + ": read failed in the header: " + std::strerror(errno));
  const int64_t data_start = 8 + static_cast<int64_t>(header_bytes);

  SafetensorsFile file;
  const HeaderParser parser(path, file_bytes - data_start);
  for (HeaderEntry& e : parser.parse(header, file.metadata)) {
    SafetensorsEntry& tensor = file.tensors[e.name];
    tensor.name = e.name;
    tensor.dtype = std::move(e.dtype);
    tensor.shape = std::move(e.shape);
    if (read == SafetensorsRead::header) {
      tensor.file = path;
      tensor.file_offset = data_start + e.begin;
      continue;
    }
    tensor.data.resize(static_cast<size_t>(e.end - e.begin));
    in.seekg(data_start + e.begin);
    in.read(reinterpret_cast<char*>(tensor.data.data()), e.end - e.begin);
    if (!in)
      throw runtime::InputError(path + ": read failed for tensor '" + e.name +
                                "': " + std::strerror(errno));
  }
  return file;
}

std::vector<size_t> safetensors_write_order(const std::vector<SafetensorsSource>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t size_a = safetensors_dtype_size(tensors[a].dtype),
                  size_b = safetensors_dtype_size(tensors[b].dtype);
    return size_a != size_b ? size_a > size_b : tensors[a].name < tensors[b].name;
  });
  return order;
}

void write_safetensors_streamed(const std::string& path,
                                const std::vector<SafetensorsSource>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const SafetensorsSource& t : tensors) {
    TRAINER_ASSERT(safetensors_dtype_size(t.dtype) > 0,
                   "tensor '" << t.name << "': unknown dtype " << t.dtype);
    TRAINER_ASSERT(t.name != "__metadata__" && names.insert(t.name).second,
                   "tensor name '" << t.name << "' is reserved or repeated");
  }
  std::vector<const SafetensorsSource*> order;
  for (const size_t i : safetensors_write_order(tensors)) order.push_back(&tensors[i]);

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ",";
      header += json_quote(key);
      header += ":";
      header += json_quote(value);
      first = false;
    }
    header += "}";
  }
  int64_t offset = 0;
  for (const SafetensorsSource* t : order) {
    if (header.size() > 1) header += ",";
    header += json_quote(t->name) + ":{\"dtype\":" + json_quote(t->dtype) + ",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i) {
      if (i > 0) header += ",";
      header += std::to_string(t->shape[i]);
    }
    const int64_t end = offset + byte_size(t->shape, safetensors_dtype_size(t->dtype));
    header += TRAINER_STR("],\"data_offsets\":[" << offset << "," << end << "]}");
    offset = end;
  }
  header += "}";
  header.append(
      (kHeaderAlignmentBytes - header.size() % kHeaderAlignmentBytes) % kHeaderAlignmentBytes, ' ');

  uint8_t length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  AtomicFileWriter writer(path);
  writer.write(length_bytes, sizeof length_bytes);
  writer.write(header);
  for (const SafetensorsSource* t : order) {
    size_t written = 0;
    t->write([&](const void* bytes, size_t size) {
      writer.write(bytes, size);
      written += size;
    });
    TRAINER_ASSERT(
        byte_size(t->shape, safetensors_dtype_size(t->dtype)) == static_cast<int64_t>(written),
        "tensor '" << t->name << "': " << written << " bytes for " << t->dtype << " shape "
                   << safetensors_shape_text(t->shape));
  }
  writer.commit();
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsSource> sources;
  for (const SafetensorsEntry& t : tensors)
    sources.push_back({t.name, t.dtype, t.shape,
                       [&t](const SafetensorsSink& sink) { sink(t.data.data(), t.data.size()); }});
  write_safetensors_streamed(path, sources, metadata);
}

// ---- atomic files --------------------------------------------------------------------------

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), temp_path_(path + ".tmp") {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw runtime::InputError(temp_path_ + ": cannot create: " + std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicFileWriter::write(const void* bytes, size_t size) {
  TRAINER_ASSERT(fd_ >= 0, "write after commit on " << path_);
  const char* next = static_cast<const char*>(bytes);
  while (size > 0) {
    const ssize_t written = ::write(fd_, next, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0)
      throw runtime::LibraryError(temp_path_ + ": write failed: " + std::strerror(errno));
    next += written;
    size -= static_cast<size_t>(written);
  }
}

void AtomicFileWriter::commit() {
  TRAINER_ASSERT(fd_ >= 0, "commit twice on " << path_);
  if (::fsync(fd_) != 0)
    throw runtime::LibraryError(temp_path_ + ": fsync failed: " + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp_path_.c_str());
    throw runtime::LibraryError(temp_path_ + ": close failed: " + std::strerror(error));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp_path_.c_str());
    throw runtime::LibraryError("rename " + temp_path_ + " -> " + path_ +
                                " failed: " + std::strerror(error));
  }
  // Make the rename itself durable. Some file systems cannot fsync a directory (EINVAL).
  std::string directory = std::filesystem::path(path_).parent_path().string();
  if (directory.empty()) directory = ".";
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    const bool synced = ::fsync(dir_fd) == 0 || errno == EINVAL;
    const int error = errno;
    ::close(dir_fd);
    if (!synced) throw runtime::LibraryError(directory + ": fsync failed: " + std::strerror(error));
  }
}

// ---- JSON text -----------------------------------------------------------------------------

std::string json_number(float value) {
  TRAINER_ASSERT(std::isfinite(value), "JSON has no " << value);
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {  // 9 significant digits always round-trip f32
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return text;
}

namespace {

float half_to_float(uint16_t bits) {
  const int exponent = bits >> 10 & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude =
        mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return bits & 0x8000 ? -magnitude : magnitude;
}

// The file of a header-only entry, open for reads of its data at any offset (pread: no shared
// file position).
class EntryFile {
 public:
  explicit EntryFile(const SafetensorsEntry& entry)
      : entry_(entry), fd_(::open(entry.file.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0)
      throw runtime::InputError(entry.file + ": cannot open to read tensor '" + entry.name +
                                "': " + std::strerror(errno));
  }
  ~EntryFile() { ::close(fd_); }
  EntryFile(const EntryFile&) = delete;
  EntryFile& operator=(const EntryFile&) = delete;

  // `bytes` bytes from `skip` bytes into the entry's data.
  void read(size_t skip, uint8_t* out, size_t bytes) {
    size_t done = 0;
    while (done < bytes) {
      const ssize_t got =
          ::pread(fd_, out + done, bytes - done,
                  static_cast<off_t>(entry_.file_offset) + static_cast<off_t>(skip + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        const std::string why = got == 0 ? "the file ends early" : std::strerror(errno);
        throw runtime::InputError(TRAINER_STR(entry_.file << ": read failed for tensor '"
                                                          << entry_.name << "' after " << done
                                                          << " of " << bytes << " bytes: " << why));
      }
      done += static_cast<size_t>(got);
    }
  }

 private:
  const SafetensorsEntry& entry_;
  int fd_;
};

// `runs` runs of `length` elements of a float entry, the first from element `first` and each
// `stride` elements after the one before, as f32 one after another: from the entry's file after
// a header-only read, each run read alone.
std::vector<float> f32_runs(const SafetensorsEntry& entry, int64_t first, int64_t length,
                            int64_t stride, int64_t runs) {
  check_float_dtype(entry);
  const size_t item = static_cast<size_t>(safetensors_dtype_size(entry.dtype));
  const size_t run_bytes = static_cast<size_t>(length) * item;
  if (entry.file_offset < 0)
    TRAINER_ASSERT(
        entry.data.size() == static_cast<size_t>(runtime::shape_numel(entry.shape)) * item,
        "validated by read_safetensors");
  std::vector<float> values(static_cast<size_t>(length * runs));
  // F32 bytes are the values; 16-bit ones are read first, then widened.
  std::vector<uint8_t> loaded(entry.dtype == "F32" ? 0 : run_bytes * static_cast<size_t>(runs));
  uint8_t* bytes = loaded.empty() ? reinterpret_cast<uint8_t*>(values.data()) : loaded.data();
  std::optional<EntryFile> file;
  if (entry.file_offset >= 0 && runs > 0 && length > 0) file.emplace(entry);
  for (int64_t run = 0; run < runs && length > 0; ++run) {
    const size_t skip = static_cast<size_t>(first + run * stride) * item;
    uint8_t* out = bytes + static_cast<size_t>(run) * run_bytes;
    if (file)
      file->read(skip, out, run_bytes);
    else
      std::memcpy(out, entry.data.data() + skip, run_bytes);
  }
  if (loaded.empty()) return values;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = static_cast<uint16_t>(loaded[2 * i] | loaded[2 * i + 1] << 8);
    if (entry.dtype == "BF16") {
      const uint32_t wide = static_cast<uint32_t>(bits) << 16;
      std::memcpy(&values[i], &wide, sizeof wide);
    } else {
      values[i] = half_to_float(bits);
    }
  }
  return values;
}

}  // namespace

void check_float_dtype(const SafetensorsEntry& entry) {
  if (entry.dtype != "F32" && entry.dtype != "BF16" && entry.dtype != "F16")
    throw runtime::InputError("tensor '" + entry.name + "' has dtype " + entry.dtype +
                              ", expected F32, BF16 or F16");
}

std::vector<float> safetensors_f32_values(const SafetensorsEntry& entry, int64_t begin,
                                          int64_t count) {
  const int64_t total = runtime::shape_numel(entry.shape);
  if (count < 0) count = total - begin;
  TRAINER_ASSERT(begin >= 0 && count >= 0 && begin + count <= total,
                 "elements [" << begin << ", " << begin + count << ") of tensor '" << entry.name
                              << "' of " << total);
  return f32_runs(entry, begin, count, count, 1);
}

std::vector<float> safetensors_f32_block(const SafetensorsEntry& entry, int64_t first_row,
                                         int64_t rows, int64_t first_col, int64_t cols) {
  TRAINER_ASSERT(entry.shape.size() == 2, "tensor '" << entry.name << "' is not a matrix");
  const int64_t width = entry.shape[1];
  TRAINER_ASSERT(first_row >= 0 && rows >= 0 && first_row + rows <= entry.shape[0] &&
                     first_col >= 0 && cols >= 0 && first_col + cols <= width,
                 "rows [" << first_row << ", " << first_row + rows << ") columns [" << first_col
                          << ", " << first_col + cols << ") of tensor '" << entry.name << "' of "
                          << safetensors_shape_text(entry.shape));
  if (cols == width) return f32_runs(entry, first_row * width, rows * width, 0, 1);  // one read
  return f32_runs(entry, first_row * width + first_col, cols, width, rows);
}

std::string safetensors_shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace trainer
