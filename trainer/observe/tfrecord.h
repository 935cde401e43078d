// TFRecord framing and the few protobuf encodings a TensorBoard event file needs, written by
// hand (no libprotobuf): CRC32C, records (length, masked CRC of the length, data, masked CRC
// of the data), and the Event / Summary messages of scalar summaries (docs/operations.md,
// "TensorBoard").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainer::tfrecord {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), table-driven; crc32c("123456789") is
// 0xe3069283.
uint32_t crc32c(std::string_view data);
// The TFRecord form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);

// One record: uint64 length (little endian), masked CRC of those 8 bytes, the data, masked
// CRC of the data.
std::string frame_record(std::string_view data);

// The records of a TFRecord file's bytes, in order, up to the first one that is truncated or
// fails a CRC (a torn tail: a run killed during a write); `torn` (optional) says whether there
// was one.
std::vector<std::string> read_records(std::string_view file_bytes, bool* torn = nullptr);

// ---- protobuf wire format (proto3; fields written in number order) ----

// An event.proto Event: wall_time (double, field 1), step (int64, field 2), then either
// file_version (string, field 3) or a summary (Summary, field 5).
struct ScalarValue {
  std::string tag;  // Summary.Value.tag, field 1
  float value = 0;  // Summary.Value.simple_value, field 2
};
std::string encode_file_version_event(double wall_time, std::string_view version);
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<ScalarValue>& values);

// The step (Event field 2) of an encoded Event, 0 when it has none (as proto3 reads it).
// InputError on malformed bytes.
int64_t event_step(std::string_view event);

}  // namespace trainer::tfrecord
