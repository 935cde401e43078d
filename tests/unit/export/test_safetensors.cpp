// Tests of the safetensors reader/writer: round trips, the exact bytes of a tiny file, a file
// assembled by hand, and one rejection per defect (each asserting the message names it).
// Files live in a per-test temporary directory that the fixture removes.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "runtime/error.h"
#include "tests/support/expect_error.h"
#include "tests/support/temp_dir_test.h"
#include "trainer/export/safetensors.h"
#include "trainer/export/safetensors_index.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {
namespace {

// Expects `call` to throw an InputError whose message holds each of `pieces`; `what` names the
// defect when nothing is thrown.
template <typename Call>
void expect_input_error(Call&& call, const std::vector<std::string>& pieces,
                        const std::string& what) {
  test_support::expect_error<runtime::InputError>(call, pieces, "accepted: " + what);
}

namespace fs = std::filesystem;

class SafetensorsTest : public test_support::TempDirTest {
 protected:
  SafetensorsTest() : TempDirTest("trainer_safetensors_") {}

  static std::vector<uint8_t> read_bytes(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write_bytes(const std::string& file, const std::vector<uint8_t>& bytes) {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }

  // 8-byte little-endian `declared_length` (default: the header's size), header, data.
  static std::vector<uint8_t> assemble(const std::string& header, const std::vector<uint8_t>& data,
                                       uint64_t declared_length = UINT64_MAX) {
    const uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
    std::vector<uint8_t> bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(length >> (8 * i)));
    bytes.insert(bytes.end(), header.begin(), header.end());
    bytes.insert(bytes.end(), data.begin(), data.end());
    return bytes;
  }

  // Writes `bytes` and expects read_safetensors to reject them naming the file and `defect`.
  void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& defect) {
    const std::string file = path("bad.safetensors");
    write_bytes(file, bytes);
    expect_input_error([&] { read_safetensors(file); }, {file, defect},
                       "a file with defect: " + defect);
  }
};

std::vector<uint8_t> bytes_of(const void* data, size_t size) {
  const auto* begin = static_cast<const uint8_t*>(data);
  return {begin, begin + size};
}

TEST_F(SafetensorsTest, RoundTripKeepsDtypesShapesBytesAndMetadata) {
  const float f32[6] = {1.5f, -2.f, 3.25f, 0.f, -0.f, 1e-30f};
  const uint16_t bf16[5] = {0x3f80, 0xc000, 0x0001, 0x7f80, 0x1234};  // odd count: 10 bytes
  const int32_t scalar = -123456;
  const double f64[2] = {M_PI, -1e300};
  const uint8_t u8[3] = {0, 127, 255};
  const std::vector<SafetensorsEntry> tensors = {
      {"z.weight", "F32", {2, 3}, bytes_of(f32, sizeof f32)},
      {"a.half", "BF16", {5}, bytes_of(bf16, sizeof bf16)},
      {"scalar", "I32", {}, bytes_of(&scalar, sizeof scalar)},
      {"m.f64", "F64", {2, 1}, bytes_of(f64, sizeof f64)},
      {"bytes", "U8", {3}, bytes_of(u8, sizeof u8)},
      {"empty", "I64", {0, 4}, {}},
  };
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quote\" back\\slash\nnew line\ttab \x01 caf\xc3\xa9"}};
  const std::string file = path("round.safetensors");
  write_safetensors(file, tensors, metadata);
  EXPECT_FALSE(fs::exists(file + ".tmp"));

  const SafetensorsFile read = read_safetensors(file);
  EXPECT_EQ(read.metadata, metadata);
  ASSERT_EQ(read.tensors.size(), tensors.size());
  for (const SafetensorsEntry& expected : tensors) {
    SCOPED_TRACE(expected.name);
    ASSERT_EQ(read.tensors.count(expected.name), 1u);
    const SafetensorsEntry& got = read.tensors.at(expected.name);
    EXPECT_EQ(got.name, expected.name);
    EXPECT_EQ(got.dtype, expected.dtype);
    EXPECT_EQ(got.shape, expected.shape);
    EXPECT_EQ(got.data, expected.data);
  }

  // The framing: u64 LE header length, a multiple of 8; the header is one JSON object whose
  // offsets tile the data section, each tensor aligned to its item size; nothing after the data.
  const std::vector<uint8_t> bytes = read_bytes(file);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | bytes[static_cast<size_t>(i)];
  EXPECT_EQ(header_length % 8, 0u);
  ASSERT_LE(8 + header_length, bytes.size());
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_length));
  EXPECT_EQ(header.front(), '{');
  const YAML::Node root = YAML::Load(header);
  ASSERT_TRUE(root.IsMap());
  EXPECT_EQ(root.size(), tensors.size() + 1);
  EXPECT_EQ(root["__metadata__"]["note"].as<std::string>(), metadata.at("note"));
  uint64_t covered = 0;
  for (const SafetensorsEntry& t : tensors) {
    const YAML::Node offsets = root[t.name]["data_offsets"];
    const uint64_t begin = offsets[0].as<uint64_t>(), end = offsets[1].as<uint64_t>();
    EXPECT_EQ(end - begin, t.data.size()) << t.name;
    EXPECT_EQ(begin % static_cast<uint64_t>(safetensors_dtype_size(t.dtype)), 0u) << t.name;
    covered += end - begin;
  }
  EXPECT_EQ(8 + header_length + covered, bytes.size());
}

TEST_F(SafetensorsTest, WriterEmitsTheExactBytesOfATinyFile) {
  const int32_t values[2] = {1, 2};
  const std::string file = path("tiny.safetensors");
  write_safetensors(file, {{"a", "I32", {2}, bytes_of(values, sizeof values)}}, {{"format", "pt"}});
  // 85 bytes of JSON padded with 3 spaces to 88 = 0x58.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})"
      "   ";
  std::vector<uint8_t> expected = {0x58, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), header.begin(), header.end());
  for (uint8_t b : {1, 0, 0, 0, 2, 0, 0, 0}) expected.push_back(b);
  EXPECT_EQ(read_bytes(file), expected);
}

TEST_F(SafetensorsTest, ReadsAFileAssembledByHand) {
  // Keys in another order, spaces, no metadata, unpadded header: all legal.
  const std::string header = R"({ "b": {"data_offsets": [4, 12], "shape": [1, 2], "dtype": "F32"},)"
                             R"( "a": {"shape": [], "dtype": "I32", "data_offsets": [0, 4]} })";
  const std::vector<uint8_t> data = {0x07, 0, 0,    0,      // I32 7
                                     0,    0, 0xc0, 0x3f,   // F32 1.5
                                     0,    0, 0,    0xc0};  // F32 -2
  write_bytes(path("hand.safetensors"), assemble(header, data));
  const SafetensorsFile file = read_safetensors(path("hand.safetensors"));
  EXPECT_TRUE(file.metadata.empty());
  ASSERT_EQ(file.tensors.size(), 2u);
  const SafetensorsEntry& a = file.tensors.at("a");
  EXPECT_EQ(a.dtype, "I32");
  EXPECT_TRUE(a.shape.empty());
  int32_t a_value = 0;
  std::memcpy(&a_value, a.data.data(), 4);
  EXPECT_EQ(a_value, 7);
  const SafetensorsEntry& b = file.tensors.at("b");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 2}));
  float b_values[2];
  std::memcpy(b_values, b.data.data(), 8);
  EXPECT_EQ(b_values[0], 1.5f);
  EXPECT_EQ(b_values[1], -2.f);
}

TEST_F(SafetensorsTest, RejectsEachDefectByName) {
  const std::vector<uint8_t> eight(8, 0);
  auto one = [](const std::string& entry) { return R"({"t": )" + entry + "}"; };
  expect_rejected({1, 2, 3, 4, 5}, "truncated");
  expect_rejected(assemble(R"({"t": {}})", {}, 100), "header length 100 goes beyond the end");
  expect_rejected(assemble("{}", {}, 200'000'000), "exceeds the limit");
  expect_rejected(assemble(R"({"t": {"dtype": "F32", )", eight), "not valid JSON");
  expect_rejected(assemble("[1, 2]", eight), "not valid JSON");
  expect_rejected(
      assemble(one(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 16]})"), eight),
      "out of range");
  expect_rejected(assemble(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})"), eight),
                  "out of range");
  expect_rejected(assemble(one(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})"), eight),
                  "size mismatch");
  expect_rejected(assemble(one(R"({"dtype": "F17", "shape": [2], "data_offsets": [0, 8]})"), eight),
                  "unknown dtype \"F17\"");
  expect_rejected(assemble(one(R"({"dtype": "F32", "data_offsets": [0, 8]})"), eight),
                  "missing \"shape\"");
  expect_rejected(assemble(one(R"({"shape": [2], "data_offsets": [0, 8]})"), eight),
                  "missing \"dtype\"");
  expect_rejected(assemble(one(R"({"dtype": "F32", "shape": [2]})"), eight),
                  "missing \"data_offsets\"");
  expect_rejected(
      assemble(one(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})"), eight),
      "shape[0] must be a non-negative integer");
  expect_rejected(
      assemble(one(R"({"dtype": "F32", "shape": [2], "data_offsets": ["0", 8]})"), eight),
      "data_offsets[0] must be a non-negative integer");
  expect_rejected(assemble(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0]})"), eight),
                  "must be a list [begin, end]");
  expect_rejected(assemble(R"({"a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "I32", "shape": [1], "data_offsets": [4, 8]}})",
                           eight),
                  "overlap");
  expect_rejected(assemble(R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]},)"
                           R"( "a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}})",
                           {}),
                  "duplicate header key \"a\"");
  expect_rejected(assemble(R"({"__metadata__": {"format": 1}})", {}), "\"__metadata__\" value");
}

// A checkpoint in two shards and its index read as one file; each defect of the index rejected,
// naming the index and the defect.
TEST_F(SafetensorsTest, ShardsOfAnIndexReadAsOneFile) {
  const float a[2] = {1.f, 2.f}, b[3] = {3.f, 4.f, 5.f}, c[1] = {6.f};
  write_safetensors(
      path("model-00001-of-00002.safetensors"),
      {{"a", "F32", {2}, bytes_of(a, sizeof a)}, {"b", "F32", {3}, bytes_of(b, sizeof b)}}, {});
  write_safetensors(path("model-00002-of-00002.safetensors"),
                    {{"c", "F32", {1}, bytes_of(c, sizeof c)}}, {});
  const std::string index = path("model.safetensors.index.json");
  auto write_index = [&](const std::string& text) { std::ofstream(index) << text; };
  write_index(
      R"({"metadata": {"total_size": 24}, "weight_map": {"a": "model-00001-of-00002.safetensors",
      "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  const SafetensorsFile merged = read_hf_weights(index);
  ASSERT_EQ(merged.tensors.size(), 3u);
  EXPECT_EQ(merged.tensors.at("b").data, bytes_of(b, sizeof b));
  EXPECT_EQ(merged.tensors.at("c").shape, std::vector<int64_t>{1});
  EXPECT_EQ(read_hf_weights(path("model-00002-of-00002.safetensors")).tensors.size(), 1u);
  // A directory as published: its index (no model.safetensors), or its model.safetensors.
  const std::string dir = std::filesystem::path(index).parent_path().string();
  EXPECT_EQ(hf_weights_path(dir), index);
  EXPECT_EQ(read_hf_weights(dir).tensors.size(), 3u);
  write_safetensors(path("model.safetensors"), {{"c", "F32", {1}, bytes_of(c, sizeof c)}}, {});
  EXPECT_EQ(hf_weights_path(dir), path("model.safetensors"));
  std::filesystem::create_directories(path("empty"));
  expect_input_error([&] { read_hf_weights(path("empty")); },
                     {"empty: a directory without model.safetensors or "
                      "model.safetensors.index.json"},
                     "a directory without weights");
  std::filesystem::remove(path("model.safetensors"));

  auto expect_index_rejected = [&](const std::string& text, const std::string& defect) {
    write_index(text);
    expect_input_error([&] { read_hf_weights(index); }, {defect},
                       "an index with defect: " + defect);
  };
  expect_index_rejected("[1, 2]", "not a JSON object (a safetensors index)");
  expect_index_rejected(R"({"metadata": {}})", "no \"weight_map\" object");
  expect_index_rejected(R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})",
                        "tensor 'a' is mapped to model-00002-of-00002.safetensors, which does "
                        "not hold it");
  expect_index_rejected(R"({"weight_map": {"a": "missing.safetensors"}})",
                        "missing.safetensors: not a readable safetensors file");
  expect_index_rejected(R"({"weight_map": {"a": [1]}})", "weight_map[\"a\"] is not a shard");
}

// A header-only read (each rank of init_from reads its own tensors) keeps no bytes; the values
// come from the file when asked, F32 and BF16 alike, a range of elements alone, from each shard
// of an index; a file cut short after its header was read is an InputError naming the file and
// the tensor.
TEST_F(SafetensorsTest, HeaderOnlyReadLoadsValuesWhenAsked) {
  const float a[3] = {1.5f, -2.f, 1e-30f};
  const uint16_t b[2] = {0x3f80, 0xc040};  // BF16 1 and -3
  const std::string file = path("lazy.safetensors");
  write_safetensors(
      file, {{"a", "F32", {3}, bytes_of(a, sizeof a)}, {"b", "BF16", {2}, bytes_of(b, sizeof b)}},
      {});
  const SafetensorsFile header = read_safetensors(file, SafetensorsRead::header);
  ASSERT_EQ(header.tensors.size(), 2u);
  for (const auto& [name, entry] : header.tensors) {
    EXPECT_TRUE(entry.data.empty()) << name;
    EXPECT_EQ(entry.file, file);
  }
  EXPECT_EQ(safetensors_f32_values(header.tensors.at("a")), std::vector<float>(a, a + 3));
  EXPECT_EQ(safetensors_f32_values(header.tensors.at("b")), (std::vector<float>{1.f, -3.f}));
  // A range of elements alone, from the file.
  EXPECT_EQ(safetensors_f32_values(header.tensors.at("a"), 1, 2),
            (std::vector<float>{-2.f, 1e-30f}));
  EXPECT_EQ(safetensors_f32_values(header.tensors.at("b"), 1, 1), std::vector<float>{-3.f});

  write_safetensors(path("model-00001-of-00002.safetensors"),
                    {{"a", "F32", {3}, bytes_of(a, sizeof a)}}, {});
  write_safetensors(path("model-00002-of-00002.safetensors"),
                    {{"b", "BF16", {2}, bytes_of(b, sizeof b)}}, {});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors"}})";
  const SafetensorsFile shards =
      read_hf_weights(path("model.safetensors.index.json"), SafetensorsRead::header);
  EXPECT_EQ(safetensors_f32_values(shards.tensors.at("b")), (std::vector<float>{1.f, -3.f}));
  EXPECT_EQ(shards.tensors.at("a").file, path("model-00001-of-00002.safetensors"));

  // A block of a matrix's columns, a read per row, in F32, BF16 and F16, from the file and from
  // memory alike.
  const float m[6] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};                        // 2 x 3
  const uint16_t mb[6] = {0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0};  // BF16 1..6
  const uint16_t mh[6] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};  // F16 1..6
  const std::string matrices = path("matrices.safetensors");
  write_safetensors(matrices,
                    {{"f", "F32", {2, 3}, bytes_of(m, sizeof m)},
                     {"b", "BF16", {2, 3}, bytes_of(mb, sizeof mb)},
                     {"h", "F16", {2, 3}, bytes_of(mh, sizeof mh)}},
                    {});
  for (const SafetensorsRead read : {SafetensorsRead::header, SafetensorsRead::whole}) {
    const SafetensorsFile both = read_safetensors(matrices, read);
    for (const char* name : {"f", "b", "h"}) {
      const SafetensorsEntry& entry = both.tensors.at(name);
      EXPECT_EQ(safetensors_f32_block(entry, 0, 2, 1, 2), (std::vector<float>{2, 3, 5, 6})) << name;
      EXPECT_EQ(safetensors_f32_block(entry, 1, 1, 0, 3), (std::vector<float>{4, 5, 6})) << name;
      EXPECT_EQ(safetensors_f32_block(entry, 0, 2, 0, 1), (std::vector<float>{1, 4})) << name;
    }
  }

  fs::resize_file(file, fs::file_size(file) - 2);  // b's last byte pair gone
  EXPECT_EQ(safetensors_f32_values(header.tensors.at("a")), std::vector<float>(a, a + 3));
  expect_input_error([&] { safetensors_f32_values(header.tensors.at("b")); },
                     {file + ": read failed for tensor 'b' after 2 of 4 bytes"},
                     "a tensor past the end of its file");
}

TEST_F(SafetensorsTest, MissingFileIsAnInputError) {
  EXPECT_THROW(read_safetensors(path("absent.safetensors")), runtime::InputError);
}

TEST_F(SafetensorsTest, WriterRefusesInconsistentEntries) {
  const std::vector<uint8_t> six(6, 0);
  EXPECT_THROW(write_safetensors(path("x"), {{"t", "F32", {2}, six}}, {}), std::logic_error);
  EXPECT_THROW(write_safetensors(path("x"), {{"t", "Q4", {6}, six}}, {}), std::logic_error);
  EXPECT_THROW(write_safetensors(path("x"), {{"t", "U8", {6}, six}, {"t", "U8", {6}, six}}, {}),
               std::logic_error);
  EXPECT_FALSE(fs::exists(path("x")));
}

// A streamed tensor is written in the pieces its source gives; one that gives another byte count
// than its shape says is refused, and no file (nor temp file) is left.
TEST_F(SafetensorsTest, StreamedTensorsAreWrittenInPiecesAndChecked) {
  const float values[4] = {1.f, -2.f, 3.5f, 0.25f};
  const std::string file = path("streamed.safetensors");
  write_safetensors_streamed(file,
                             {{"t",
                               "F32",
                               {2, 2},
                               [&](const SafetensorsSink& sink) {
                                 sink(values, 4);  // the first value, then the other three
                                 sink(values + 1, 12);
                               }}},
                             {{"format", "pt"}});
  EXPECT_EQ(safetensors_f32_values(read_safetensors(file).tensors.at("t")),
            std::vector<float>(values, values + 4));
  const std::string short_file = path("short.safetensors");
  EXPECT_THROW(
      write_safetensors_streamed(
          short_file,
          {{"t", "F32", {2, 2}, [&](const SafetensorsSink& sink) { sink(values, 12); }}}, {}),
      std::logic_error);
  EXPECT_FALSE(fs::exists(short_file));
  EXPECT_FALSE(fs::exists(short_file + ".tmp"));
}

TEST_F(SafetensorsTest, UncommittedWriterLeavesTheOldFileAndNoTemp) {
  const std::string file = path("kept.txt");
  {
    AtomicFileWriter writer(file);
    writer.write("old");
    writer.commit();
  }
  {
    AtomicFileWriter writer(file);
    writer.write("new, never committed");
    EXPECT_TRUE(fs::exists(file + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  const std::vector<uint8_t> bytes = read_bytes(file);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "old");
  EXPECT_THROW(AtomicFileWriter(path("no/such/dir/file")), runtime::InputError);
}

TEST(JsonText, NumbersAreShortestAndRoundTripFloat) {
  EXPECT_EQ(json_number(0.1f), "0.1");
  EXPECT_EQ(json_number(1e-5f), "1e-05");
  EXPECT_EQ(json_number(0.02f), "0.02");
  EXPECT_EQ(json_number(0.f), "0");
  EXPECT_EQ(json_number(-3.f), "-3");
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float value;
    std::memcpy(&value, &bits, sizeof value);
    if (!std::isfinite(value)) continue;
    const std::string text = json_number(value);
    ASSERT_EQ(std::strtof(text.c_str(), nullptr), value) << text;
  }
}

TEST(JsonText, StringsEscapeAndParseBack) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c\nd\x01"), R"("a\"b\\c\nd\u0001")");
  const std::string tricky = "tab\t cr\r bell\x07 caf\xc3\xa9 \"quoted\"";
  EXPECT_EQ(YAML::Load("{\"k\": " + json_quote(tricky) + "}")["k"].as<std::string>(), tricky);
}

}  // namespace
}  // namespace trainer
