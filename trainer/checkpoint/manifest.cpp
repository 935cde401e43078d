// manifest.json of a checkpoint step: written as JSON text by hand, parsed with yaml-cpp (JSON is
// YAML) and validated field by field. Every parse error is runtime::InputError "<path>: <defect>"
// with the JSON location of the defect ("shards[3].slice.dim").
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "runtime/error.h"
#include "trainer/checkpoint/format.h"
#include "trainer/export/json_object.h"
#include "trainer/export/safetensors.h"
#include "trainer/util/json_object_writer.h"

namespace trainer::checkpoint {
namespace {

constexpr runtime::DType kDTypes[] = {runtime::DType::f32, runtime::DType::bf16,
                                      runtime::DType::i32, runtime::DType::u8};

// a * b for non-negative operands, or -1 on overflow.
int64_t checked_multiply(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return -1;
  return a * b;
}

std::string json_int_list(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

class ManifestParser {
 public:
  explicit ManifestParser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& defect) const {
    throw runtime::InputError(path_ + ": " + defect);
  }

  YAML::Node field(const YAML::Node& object, const std::string& key,
                   const std::string& where) const {
    const YAML::Node value = object[key];
    if (!value) fail("missing \"" + key + "\"" + (where.empty() ? "" : " in " + where));
    return value;
  }

  // A JSON integer (unquoted) in [minimum, INT64_MAX].
  int64_t integer(const YAML::Node& node, const std::string& what, int64_t minimum) const {
    int64_t value = 0;
    if (!plain_number(node, value)) fail(what + " must be an integer");
    if (value < minimum) fail(TRAINER_STR(what << " must be >= " << minimum << ", got " << value));
    return value;
  }

  uint64_t unsigned_integer(const YAML::Node& node, const std::string& what) const {
    uint64_t value = 0;
    if (!plain_number(node, value)) fail(what + " must be an integer in [0, 2^64)");
    return value;
  }

  std::string text(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar() || node.Tag() != "!") fail(what + " must be a string");
    return node.Scalar();
  }

  std::vector<int64_t> integer_list(const YAML::Node& node, const std::string& what) const {
    if (!node.IsSequence()) fail(what + " must be a list");
    std::vector<int64_t> values;
    for (size_t i = 0; i < node.size(); ++i)
      values.push_back(integer(node[i], what + "[" + std::to_string(i) + "]", 0));
    return values;
  }

  runtime::DType dtype(const YAML::Node& node, const std::string& what) const {
    const std::string name = text(node, what);
    for (const runtime::DType candidate : kDTypes)
      if (runtime::dtype_name(candidate) == name) return candidate;
    fail(what + ": unknown dtype \"" + name + "\"");
  }

  Manifest parse(const std::string& json_text) const {
    const YAML::Node root =
        load_json_object(json_text, path_, "not valid JSON", "a manifest is a JSON object");
    const int64_t version = integer(field(root, "version", ""), "version", 0);
    if (version != kManifestVersion)
      fail(TRAINER_STR("unknown manifest version " << version << " (this build reads version "
                                                   << kManifestVersion << ")"));
    Manifest manifest;
    parse_meta(root, manifest.meta);
    const YAML::Node files = field(root, "files", "");
    if (!files.IsSequence()) fail("\"files\" must be a list");
    for (size_t i = 0; i < files.size(); ++i)
      manifest.files.push_back(parse_file(files[i], "files[" + std::to_string(i) + "]"));
    std::map<std::string, const ManifestFile*> files_by_name;
    for (const ManifestFile& file : manifest.files)
      if (!files_by_name.emplace(file.name, &file).second)
        fail("file \"" + file.name + "\" is listed twice in \"files\"");
    const YAML::Node shards = field(root, "shards", "");
    if (!shards.IsSequence()) fail("\"shards\" must be a list");
    for (size_t i = 0; i < shards.size(); ++i)
      manifest.shards.push_back(
          parse_shard(shards[i], "shards[" + std::to_string(i) + "]", files_by_name));
    std::map<std::string, const ManifestShard*> first_shard_of;
    for (const ManifestShard& shard : manifest.shards) {
      const ManifestShard*& first_seen = first_shard_of[shard.name];
      if (first_seen == nullptr) {
        first_seen = &shard;
      } else if (first_seen->global_shape != shard.global_shape ||
                 first_seen->dtype != shard.dtype) {
        fail(TRAINER_STR("tensor '" << shard.name << "' has shards of different global shape or "
                                    << "dtype: " << shape_text(first_seen->global_shape) << " "
                                    << runtime::dtype_name(first_seen->dtype) << " and "
                                    << shape_text(shard.global_shape) << " "
                                    << runtime::dtype_name(shard.dtype)));
      }
    }
    return manifest;
  }

 private:
  template <typename T>
  static bool plain_number(const YAML::Node& node, T& value) {
    if (!node.IsScalar() || node.Tag() != "?") return false;  // quoted JSON strings have tag "!"
    const std::string& scalar = node.Scalar();
    const char* end = scalar.data() + scalar.size();
    const auto [stop, status] = std::from_chars(scalar.data(), end, value);
    return status == std::errc() && stop == end && !scalar.empty();
  }

  void parse_meta(const YAML::Node& root, CheckpointMeta& meta) const {
    meta.step = integer(field(root, "step", ""), "step", 0);
    meta.consumed_samples = integer(field(root, "consumed_samples", ""), "consumed_samples", 0);
    meta.seed = unsigned_integer(field(root, "seed", ""), "seed");
    meta.config_yaml = text(field(root, "config_yaml", ""), "config_yaml");
    const YAML::Node layout = field(root, "layout", "");
    if (!layout.IsMap()) fail("\"layout\" must be an object");
    meta.tensor = integer(field(layout, "tensor", "layout"), "layout.tensor", 1);
    meta.pipeline = integer(field(layout, "pipeline", "layout"), "layout.pipeline", 1);
    meta.data = integer(field(layout, "data", "layout"), "layout.data", 1);
    // Written since context parallelism exists; older checkpoints had none.
    if (layout["context"]) meta.context = integer(layout["context"], "layout.context", 1);
    const YAML::Node extra = field(root, "extra", "");
    if (!extra.IsMap()) fail("\"extra\" must be an object");
    for (const auto& item : extra) {
      const std::string key = item.first.Scalar();
      meta.extra[key] = text(item.second, "extra." + key);
    }
  }

  ManifestFile parse_file(const YAML::Node& node, const std::string& where) const {
    if (!node.IsMap()) fail(where + " must be an object");
    ManifestFile file;
    file.name = text(field(node, "name", where), where + ".name");
    if (file.name.empty() || file.name.find('/') != std::string::npos || file.name == "." ||
        file.name == "..")
      fail(where + ".name: \"" + file.name + "\" is not a file name inside the step directory");
    file.rank = static_cast<int>(integer(field(node, "rank", where), where + ".rank", 0));
    file.bytes = integer(field(node, "bytes", where), where + ".bytes", 0);
    const std::string checksum = text(field(node, "xxh64", where), where + ".xxh64");
    uint64_t value = 0;
    const auto [stop, status] =
        std::from_chars(checksum.data(), checksum.data() + checksum.size(), value, 16);
    if (checksum.size() != 16 || status != std::errc() || stop != checksum.data() + 16)
      fail(where + ".xxh64: \"" + checksum + "\" is not 16 hex digits");
    file.xxh64 = value;
    return file;
  }

  ManifestShard parse_shard(const YAML::Node& node, const std::string& where,
                            const std::map<std::string, const ManifestFile*>& files) const {
    if (!node.IsMap()) fail(where + " must be an object");
    ManifestShard shard;
    shard.name = text(field(node, "name", where), where + ".name");
    if (shard.name.empty()) fail(where + ".name is empty");
    const std::string tensor = where + " (tensor '" + shard.name + "')";
    shard.dtype = dtype(field(node, "dtype", tensor), tensor + ".dtype");
    shard.global_shape =
        integer_list(field(node, "global_shape", tensor), tensor + ".global_shape");
    const YAML::Node slice = field(node, "slice", tensor);
    if (!slice.IsMap()) fail(tensor + ".slice must be an object");
    shard.slice.dim = static_cast<int>(
        integer(field(slice, "dim", tensor + ".slice"), tensor + ".slice.dim", -1));
    shard.slice.offset =
        integer(field(slice, "offset", tensor + ".slice"), tensor + ".slice.offset", 0);
    shard.slice.length =
        integer(field(slice, "length", tensor + ".slice"), tensor + ".slice.length", 0);
    const std::string defect = slice_defect(shard.global_shape, shard.slice);
    if (!defect.empty()) fail(tensor + ".slice: " + defect);
    shard.file = text(field(node, "file", tensor), tensor + ".file");
    const auto file = files.find(shard.file);
    if (file == files.end()) fail(tensor + ".file: \"" + shard.file + "\" is not in \"files\"");
    shard.offset = integer(field(node, "offset", tensor), tensor + ".offset", 0);
    shard.bytes = integer(field(node, "bytes", tensor), tensor + ".bytes", 0);
    if (shard.offset > file->second->bytes || shard.bytes > file->second->bytes - shard.offset)
      fail(TRAINER_STR(tensor << ": bytes [" << shard.offset << ", " << shard.offset + shard.bytes
                              << ") lie outside " << shard.file << " (" << file->second->bytes
                              << " bytes)"));
    int64_t expected = runtime::dtype_size(shard.dtype);
    for (const int64_t extent : local_shape(shard.global_shape, shard.slice))
      if (expected >= 0) expected = checked_multiply(expected, extent);
    if (expected != shard.bytes)
      fail(TRAINER_STR(
          tensor << ": " << shard.bytes << " bytes, but " << runtime::dtype_name(shard.dtype)
                 << " slice " << slice_text(shard.slice) << " of " << shape_text(shard.global_shape)
                 << " needs "
                 << (expected < 0 ? std::string("more than 2^63") : std::to_string(expected))));
    return shard;
  }

  const std::string& path_;
};

}  // namespace

std::string step_dir_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

std::string rank_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d.bin", rank);
  return name;
}

int64_t parse_step_dir_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step_";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.size() > kPrefix.size() + 18)
    return -1;
  int64_t step = 0;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  const auto [stop, status] = std::from_chars(begin, end, step);
  if (status != std::errc() || stop != end || *begin == '-' || *begin == '+') return -1;
  return step;
}

std::vector<int64_t> local_shape(const std::vector<int64_t>& global_shape,
                                 const ShardSlice& slice) {
  std::vector<int64_t> shape = global_shape;
  if (slice.dim >= 0) shape[static_cast<size_t>(slice.dim)] = slice.length;
  return shape;
}

std::string slice_defect(const std::vector<int64_t>& global_shape, const ShardSlice& slice) {
  for (const int64_t extent : global_shape)
    if (extent < 0) return "global shape " + shape_text(global_shape) + " has a negative extent";
  if (slice.dim == -1) return "";
  if (slice.dim < -1 || slice.dim >= static_cast<int>(global_shape.size()))
    return TRAINER_STR("dim " << slice.dim << " out of range for global shape "
                              << shape_text(global_shape));
  const int64_t extent = global_shape[static_cast<size_t>(slice.dim)];
  if (slice.offset < 0 || slice.length < 0 || slice.offset > extent ||
      slice.length > extent - slice.offset)
    return TRAINER_STR("range [" << slice.offset << ", " << slice.offset + slice.length
                                 << ") of dim " << slice.dim << " outside [0, " << extent
                                 << ") of global shape " << shape_text(global_shape));
  return "";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string slice_text(const ShardSlice& slice) {
  if (slice.dim == -1) return "whole";
  return TRAINER_STR("dim " << slice.dim << " [" << slice.offset << ", "
                            << slice.offset + slice.length << ")");
}

std::string manifest_to_json(const Manifest& manifest) {
  const CheckpointMeta& meta = manifest.meta;
  std::ostringstream out;
  out << "{\n  \"version\": " << kManifestVersion << ",\n  \"step\": " << meta.step
      << ",\n  \"consumed_samples\": " << meta.consumed_samples << ",\n  \"seed\": " << meta.seed
      << ",\n  \"layout\": {\"tensor\": " << meta.tensor << ", \"pipeline\": " << meta.pipeline
      << ", \"data\": " << meta.data << ", \"context\": " << meta.context
      << "},\n  \"extra\": {";
  bool first = true;
  for (const auto& [key, value] : meta.extra) {
    out << (first ? "\n    " : ",\n    ") << json_quote(key) << ": " << json_quote(value);
    first = false;
  }
  out << (meta.extra.empty() ? "}" : "\n  }")
      << ",\n  \"config_yaml\": " << json_quote(meta.config_yaml) << ",\n  \"files\": [";
  first = true;
  for (const ManifestFile& file : manifest.files) {
    out << (first ? "\n    " : ",\n    ") << "{\"name\": " << json_quote(file.name)
        << ", \"rank\": " << file.rank << ", \"bytes\": " << file.bytes << ", \"xxh64\": \""
        << hex64(file.xxh64) << "\"}";
    first = false;
  }
  out << (manifest.files.empty() ? "]" : "\n  ]") << ",\n  \"shards\": [";
  first = true;
  for (const ManifestShard& shard : manifest.shards) {
    out << (first ? "\n    " : ",\n    ") << "{\"name\": " << json_quote(shard.name)
        << ", \"dtype\": \"" << runtime::dtype_name(shard.dtype)
        << "\", \"global_shape\": " << json_int_list(shard.global_shape)
        << ", \"slice\": {\"dim\": " << shard.slice.dim << ", \"offset\": " << shard.slice.offset
        << ", \"length\": " << shard.slice.length << "}, \"file\": " << json_quote(shard.file)
        << ", \"offset\": " << shard.offset << ", \"bytes\": " << shard.bytes << "}";
    first = false;
  }
  out << (manifest.shards.empty() ? "]" : "\n  ]") << "\n}\n";
  return out.str();
}

Manifest parse_manifest(const std::string& json_text, const std::string& path) {
  return ManifestParser(path).parse(json_text);
}

Manifest read_manifest(const std::string& step_dir) {
  const std::string path = step_dir + "/" + kManifestFileName;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw runtime::InputError(path +
                              ": cannot open the checkpoint manifest: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw runtime::InputError(path + ": read failed");
  return parse_manifest(text.str(), path);
}

}  // namespace trainer::checkpoint
