// Tests of the checkpoint format pieces: XXH64 against reference digests (the short ones are the
// published test vectors; the low 32 bits of the long ones match zstd's frame checksum, which is
// XXH64), step and rank names, slice validation, and the manifest JSON round trip and rejections.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "trainer/checkpoint/format.h"

namespace trainer::checkpoint {
namespace {

std::vector<unsigned char> pattern(size_t count, unsigned (*byte)(size_t)) {
  std::vector<unsigned char> bytes(count);
  for (size_t i = 0; i < count; ++i) bytes[i] = static_cast<unsigned char>(byte(i));
  return bytes;
}

TEST(Xxh64, MatchesReferenceDigests) {
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("a", 1), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ULL);
  const auto p100 = pattern(100, [](size_t i) { return static_cast<unsigned>((i * 7 + 3) % 256); });
  EXPECT_EQ(xxh64(p100.data(), p100.size()), 0xA61F8D4C170FE531ULL);
  const auto p4099 =
      pattern(4099, [](size_t i) { return static_cast<unsigned>((i * i + 11) % 251); });
  EXPECT_EQ(xxh64(p4099.data(), p4099.size()), 0x5D14B87010EF6943ULL);
}

TEST(Xxh64, StreamingInAnyPiecesEqualsOneShot) {
  const auto bytes =
      pattern(4099, [](size_t i) { return static_cast<unsigned>((i * i + 11) % 251); });
  for (const size_t piece :
       {size_t{1}, size_t{3}, size_t{31}, size_t{32}, size_t{33}, size_t{1000}}) {
    Xxh64 state;
    for (size_t at = 0; at < bytes.size(); at += piece)
      state.update(bytes.data() + at, std::min(piece, bytes.size() - at));
    EXPECT_EQ(state.digest(), 0x5D14B87010EF6943ULL) << "pieces of " << piece;
  }
  EXPECT_NE(xxh64(bytes.data(), bytes.size(), 1), xxh64(bytes.data(), bytes.size(), 0));
  EXPECT_EQ(hex64(0x00AB00000000CDEFULL), "00ab00000000cdef");
}

TEST(CheckpointNames, StepAndRankNames) {
  EXPECT_EQ(step_dir_name(42), "step_00000042");
  EXPECT_EQ(step_dir_name(123456789), "step_123456789");
  EXPECT_EQ(rank_file_name(3), "rank_00003.bin");
  EXPECT_EQ(parse_step_dir_name("step_00000042"), 42);
  EXPECT_EQ(parse_step_dir_name("step_123456789"), 123456789);
  EXPECT_EQ(parse_step_dir_name("step_00000042.tmp"), -1);
  EXPECT_EQ(parse_step_dir_name("step_"), -1);
  EXPECT_EQ(parse_step_dir_name("step_-1"), -1);
  EXPECT_EQ(parse_step_dir_name("latest"), -1);
}

TEST(CheckpointSlices, DefectsAndLocalShapes) {
  EXPECT_EQ(slice_defect({8, 6}, {}), "");
  EXPECT_EQ(slice_defect({8, 6}, {0, 4, 4}), "");
  EXPECT_EQ(slice_defect({8, 6}, {1, 0, 6}), "");
  EXPECT_NE(slice_defect({8, 6}, {2, 0, 1}).find("dim 2 out of range"), std::string::npos);
  EXPECT_NE(slice_defect({8, 6}, {0, 6, 3}).find("[6, 9) of dim 0 outside [0, 8)"),
            std::string::npos);
  EXPECT_NE(slice_defect({8, 6}, {1, -1, 2}), "");
  EXPECT_NE(slice_defect({8, 6}, {-2, 0, 0}), "");
  EXPECT_EQ(local_shape({8, 6}, {1, 2, 3}), (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(local_shape({8, 6}, {}), (std::vector<int64_t>{8, 6}));
}

Manifest sample_manifest() {
  Manifest manifest;
  manifest.meta.step = 12;
  manifest.meta.consumed_samples = 96;
  manifest.meta.seed = UINT64_MAX;
  manifest.meta.config_yaml =
      "model:\n  name: \"gpt\"\t# tab\n  path: C:\\data\n  note: \xC3\xA9\x01\n";
  manifest.meta.tensor = 2;
  manifest.meta.pipeline = 3;
  manifest.meta.data = 4;
  manifest.meta.extra = {{"rng.counter", "123456789012345"}, {"quote\"key", "line\nbreak"}};
  manifest.files = {{"rank_00000.bin", 0, 120, 0x0123456789ABCDEFULL},
                    {"rank_00001.bin", 1, 96, 0xFEDCBA9876543210ULL}};
  manifest.shards = {
      {"param/w", {8, 6}, {0, 0, 4}, runtime::DType::f32, "rank_00000.bin", 0, 96},
      {"param/b", {6}, {}, runtime::DType::f32, "rank_00000.bin", 96, 24},
      {"param/w", {8, 6}, {0, 4, 4}, runtime::DType::f32, "rank_00001.bin", 0, 96},
  };
  return manifest;
}

void expect_same(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.meta.step, b.meta.step);
  EXPECT_EQ(a.meta.consumed_samples, b.meta.consumed_samples);
  EXPECT_EQ(a.meta.seed, b.meta.seed);
  EXPECT_EQ(a.meta.config_yaml, b.meta.config_yaml);
  EXPECT_EQ(a.meta.tensor, b.meta.tensor);
  EXPECT_EQ(a.meta.pipeline, b.meta.pipeline);
  EXPECT_EQ(a.meta.data, b.meta.data);
  EXPECT_EQ(a.meta.extra, b.meta.extra);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (size_t i = 0; i < a.files.size(); ++i) {
    EXPECT_EQ(a.files[i].name, b.files[i].name);
    EXPECT_EQ(a.files[i].rank, b.files[i].rank);
    EXPECT_EQ(a.files[i].bytes, b.files[i].bytes);
    EXPECT_EQ(a.files[i].xxh64, b.files[i].xxh64);
  }
  ASSERT_EQ(a.shards.size(), b.shards.size());
  for (size_t i = 0; i < a.shards.size(); ++i) {
    EXPECT_EQ(a.shards[i].name, b.shards[i].name);
    EXPECT_EQ(a.shards[i].global_shape, b.shards[i].global_shape);
    EXPECT_EQ(a.shards[i].slice.dim, b.shards[i].slice.dim);
    EXPECT_EQ(a.shards[i].slice.offset, b.shards[i].slice.offset);
    EXPECT_EQ(a.shards[i].slice.length, b.shards[i].slice.length);
    EXPECT_EQ(a.shards[i].dtype, b.shards[i].dtype);
    EXPECT_EQ(a.shards[i].file, b.shards[i].file);
    EXPECT_EQ(a.shards[i].offset, b.shards[i].offset);
    EXPECT_EQ(a.shards[i].bytes, b.shards[i].bytes);
  }
}

TEST(Manifest, JsonRoundTripKeepsEveryField) {
  const Manifest manifest = sample_manifest();
  const std::string json = manifest_to_json(manifest);
  EXPECT_NE(json.find("\"version\": 1"), std::string::npos);
  EXPECT_NE(json.find("\"xxh64\": \"0123456789abcdef\""), std::string::npos);
  expect_same(parse_manifest(json, "m.json"), manifest);
  Manifest empty;
  expect_same(parse_manifest(manifest_to_json(empty), "m.json"), empty);
}

// Replaces the first `from` in the sample's JSON with `to`; expects rejection naming `defect`.
void expect_rejected(const std::string& from, const std::string& to, const std::string& defect) {
  std::string json = manifest_to_json(sample_manifest());
  const size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  json.replace(at, from.size(), to);
  try {
    parse_manifest(json, "/ckpt/step_00000012/manifest.json");
    ADD_FAILURE() << "accepted: " << from << " -> " << to;
  } catch (const runtime::InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/ckpt/step_00000012/manifest.json: "), std::string::npos) << message;
    EXPECT_NE(message.find(defect), std::string::npos) << message;
  }
}

TEST(Manifest, RejectsEachDefectNamingTheFile) {
  expect_rejected("{\n", "[\n", "not valid JSON");
  expect_rejected("\n}\n", "\n", "not valid JSON");
  expect_rejected("\"version\": 1", "\"version\": 2", "unknown manifest version 2");
  expect_rejected("\"version\": 1", "\"versio\": 1", "missing \"version\"");
  expect_rejected("\"step\": 12,", "", "missing \"step\"");
  expect_rejected("\"step\": 12", "\"step\": \"12\"", "step must be an integer");
  expect_rejected("\"seed\": 18446744073709551615", "\"seed\": 18446744073709551616", "seed");
  expect_rejected("\"tensor\": 2", "\"tensor\": 0", "layout.tensor must be >= 1");
  expect_rejected("\"xxh64\": \"0123456789abcdef\"", "\"xxh64\": \"0123\"", "not 16 hex digits");
  expect_rejected("\"name\": \"rank_00001.bin\"", "\"name\": \"rank_00000.bin\"", "listed twice");
  expect_rejected("\"name\": \"rank_00001.bin\"", "\"name\": \"../x.bin\"", "not a file name");
  expect_rejected("\"dtype\": \"f32\"", "\"dtype\": \"f16\"", "unknown dtype \"f16\"");
  expect_rejected("\"offset\": 4, \"length\": 4}", "\"offset\": 4, \"length\": 5}",
                  "shards[2] (tensor 'param/w').slice: range [4, 9) of dim 0 outside [0, 8)");
  expect_rejected("\"bytes\": 96}", "\"bytes\": 92}",
                  "92 bytes, but f32 slice dim 0 [0, 4) of [8, 6] needs 96");
  expect_rejected("\"offset\": 96", "\"offset\": 100", "lie outside rank_00000.bin (120 bytes)");
  expect_rejected("\"file\": \"rank_00000.bin\"", "\"file\": \"rank_00007.bin\"",
                  "not in \"files\"");
  expect_rejected("\"global_shape\": [8, 6], \"slice\": {\"dim\": 0, \"offset\": 4",
                  "\"global_shape\": [9, 6], \"slice\": {\"dim\": 0, \"offset\": 4",
                  "tensor 'param/w' has shards of different global shape");
}

}  // namespace
}  // namespace trainer::checkpoint
