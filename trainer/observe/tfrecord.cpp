// TFRecord framing, CRC32C and the Event/Summary encodings of tfrecord.h. Rules: integers on
// the wire are little endian; proto fields are written in field-number order, each once.
#include "trainer/observe/tfrecord.h"

#include <array>
#include <cstring>

#include "runtime/error.h"

namespace trainer::tfrecord {
namespace {

constexpr uint32_t kCastagnoliReflected = 0x82f63b78u;
constexpr uint32_t kMaskDelta = 0xa282ead8u;

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kCastagnoliReflected : 0u);
    table[byte] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

template <class T>
void put_little_endian(std::string& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the trainer's targets are little endian
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

void put_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event fields 1 and 2 (step 0 is proto3's default and is not written).
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_key(event, 1, kFixed64);
  put_little_endian(event, wall_time);
  if (step != 0) {
    put_key(event, 2, kVarint);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

// Reads protobuf wire data field by field.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return at_ == data_.size(); }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= data_.size()) throw runtime::InputError("truncated varint in an event");
      const auto byte = static_cast<unsigned char>(data_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    throw runtime::InputError("varint longer than 10 bytes in an event");
  }
  void skip(uint32_t wire_type) {
    size_t length = 0;
    switch (wire_type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        length = 8;
        break;
      case kFixed32:
        length = 4;
        break;
      case kLengthDelimited:
        length = static_cast<size_t>(varint());
        break;
      default:
        throw runtime::InputError("unknown wire type " + std::to_string(wire_type) +
                                  " in an event");
    }
    if (length > data_.size() - at_) throw runtime::InputError("truncated field in an event");
    at_ += length;
  }

 private:
  std::string_view data_;
  size_t at_ = 0;
};

uint64_t read_uint64(std::string_view bytes) {
  uint64_t value = 0;
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

uint32_t read_uint32(std::string_view bytes) {
  uint32_t value = 0;
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (const char c : data)
    crc = kCrcTable[(crc ^ static_cast<unsigned char>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string frame_record(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_little_endian(record, static_cast<uint64_t>(data.size()));
  put_little_endian(record, masked_crc32c(std::string_view(record).substr(0, 8)));
  record.append(data);
  put_little_endian(record, masked_crc32c(data));
  return record;
}

std::vector<std::string> read_records(std::string_view bytes, bool* torn) {
  std::vector<std::string> records;
  size_t at = 0;
  auto stop = [&](bool torn_tail) {
    if (torn != nullptr) *torn = torn_tail;
    return records;
  };
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) return stop(true);
    const std::string_view length_bytes = bytes.substr(at, 8);
    if (read_uint32(bytes.substr(at + 8, 4)) != masked_crc32c(length_bytes)) return stop(true);
    const uint64_t length = read_uint64(length_bytes);
    at += 12;
    if (length > bytes.size() - at || bytes.size() - at - length < 4) return stop(true);
    const std::string_view data = bytes.substr(at, length);
    if (read_uint32(bytes.substr(at + length, 4)) != masked_crc32c(data)) return stop(true);
    records.emplace_back(data);
    at += length + 4;
  }
  return stop(false);
}

std::string encode_file_version_event(double wall_time, std::string_view version) {
  std::string event = event_header(wall_time, 0);
  put_bytes_field(event, 3, version);
  return event;
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<ScalarValue>& values) {
  std::string summary;
  for (const ScalarValue& v : values) {
    std::string value;
    put_bytes_field(value, 1, v.tag);
    put_key(value, 2, kFixed32);
    put_little_endian(value, v.value);
    put_bytes_field(summary, 1, value);
  }
  std::string event = event_header(wall_time, step);
  put_bytes_field(event, 5, summary);
  return event;
}

int64_t event_step(std::string_view event) {
  WireReader reader(event);
  int64_t step = 0;
  while (!reader.done()) {
    const uint64_t key = reader.varint();
    const auto field = static_cast<uint32_t>(key >> 3), wire_type = static_cast<uint32_t>(key & 7);
    if (field == 2 && wire_type == kVarint)
      step = static_cast<int64_t>(reader.varint());
    else
      reader.skip(wire_type);
  }
  return step;
}

}  // namespace trainer::tfrecord
