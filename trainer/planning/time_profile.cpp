// The profile's JSON (nlohmann-json): one object, every field present; a missing or mistyped
// field is an InputError naming the file and the field. Written atomically (atomic_file.h).
#include "trainer/planning/time_profile.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/error.h"
#include "trainer/util/atomic_file.h"

namespace trainer {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kFormatVersion = 2;  // 2: ranks, collectives_measured

template <class T>
T field(const Json& json, const char* name, const std::string& path) {
  if (!json.contains(name))
    throw runtime::InputError(
        TRAINER_STR(path << ": time profile field '" << name << "' is missing"));
  try {
    return json.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw runtime::InputError(TRAINER_STR(path
                                          << ": time profile field '" << name
                                          << "' has the wrong type: " << json.at(name).dump()));
  }
}

double seconds_field(const Json& json, const char* name, const std::string& path) {
  const double value = field<double>(json, name, path);
  if (!(value >= 0))
    throw runtime::InputError(
        TRAINER_STR(path << ": time profile field '" << name << "' must be >= 0, got " << value));
  return value;
}

}  // namespace

std::string shape_key(const model::LayerDims& d, int64_t vocab_shard, bool documents) {
  const model::BlockFeatures& f = d.features;
  std::ostringstream key;
  key << "T" << d.seq << " B" << d.micro_batch << " C" << d.hidden << " H" << d.heads << " Hkv"
      << d.kv_heads() << " D" << d.head_dim << " F" << d.ffn << " V" << vocab_shard << " "
      << runtime::dtype_name(d.activation_dtype) << " " << (f.flash() ? "flash" : "unfused")
      << (f.layernorm() ? " layernorm" : " rmsnorm") << (f.swiglu ? " swiglu" : " gelu")
      << (f.rope ? " rope" : " learned")
      << (f.linear_bias ? " bias"
          : f.qkv_bias  ? " qkvbias"
                        : " nobias")
      << (f.qk_norm ? " qknorm" : "") << " dropout" << d.hidden_dropout << "/"
      << d.attention_dropout << " tp" << d.tp_size << (d.sequence_parallel ? " sp" : "") << " cp"
      << d.cp_size << (documents ? " documents" : "");
  return key.str();
}

const RebuildTime* find_rebuild(const TimeProfile& profile, const std::string& entry) {
  for (const RebuildTime& r : profile.rebuild)
    if (r.entry == entry) return &r;
  return nullptr;
}

std::string time_profile_json(const TimeProfile& p) {
  Json rebuild = Json::array();
  for (const RebuildTime& r : p.rebuild)
    rebuild.push_back(Json{{"entry", r.entry}, {"seconds", r.seconds}});
  const Json json = {{"format", kFormatVersion},
                     {"device", p.device},
                     {"dtype", p.dtype},
                     {"shapes", p.shapes},
                     {"build", p.build},
                     {"repeats", p.repeats},
                     {"gemm_gflops", p.gemm_gflops},
                     {"copy_gbps", p.copy_gbps},
                     {"layer_forward_s", p.layer_forward_s},
                     {"layer_backward_s", p.layer_backward_s},
                     {"stash_cold_forward_s", p.stash_cold_forward_s},
                     {"stash_cold_backward_s", p.stash_cold_backward_s},
                     {"rebuild", rebuild},
                     {"embedding_head_forward_s", p.embedding_head_forward_s},
                     {"embedding_head_backward_s", p.embedding_head_backward_s},
                     {"optimizer_s_per_param", p.optimizer_s_per_param},
                     {"ranks", p.ranks},
                     {"collectives_measured", p.collectives_measured}};
  return json.dump(1) + "\n";
}

void write_time_profile(const TimeProfile& p, const std::string& path) {
  write_file_atomically(path, time_profile_json(p));
}

TimeProfile read_time_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw runtime::InputError("cannot open time profile " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_time_profile(text.str(), path);
}

TimeProfile parse_time_profile(const std::string& text, const std::string& path) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw runtime::InputError(TRAINER_STR(path << ": not a JSON time profile: " << e.what()));
  }
  if (!json.is_object()) throw runtime::InputError(path + ": a time profile is a JSON object");
  const auto format = field<int64_t>(json, "format", path);
  if (format != kFormatVersion)
    throw runtime::InputError(TRAINER_STR(path << ": time profile format " << format
                                               << ", this trainer reads " << kFormatVersion));
  TimeProfile p;
  p.device = field<std::string>(json, "device", path);
  p.dtype = field<std::string>(json, "dtype", path);
  p.shapes = field<std::string>(json, "shapes", path);
  p.build = field<std::string>(json, "build", path);
  p.repeats = field<int64_t>(json, "repeats", path);
  p.gemm_gflops = seconds_field(json, "gemm_gflops", path);
  p.copy_gbps = seconds_field(json, "copy_gbps", path);
  if (!(p.gemm_gflops > 0 && p.copy_gbps > 0))
    throw runtime::InputError(TRAINER_STR(path
                                          << ": time profile rates must be > 0, got gemm_gflops "
                                          << p.gemm_gflops << ", copy_gbps " << p.copy_gbps));
  p.layer_forward_s = seconds_field(json, "layer_forward_s", path);
  p.layer_backward_s = seconds_field(json, "layer_backward_s", path);
  if (json.contains("stash_cold_forward_s"))
    p.stash_cold_forward_s = seconds_field(json, "stash_cold_forward_s", path);
  if (json.contains("stash_cold_backward_s"))
    p.stash_cold_backward_s = seconds_field(json, "stash_cold_backward_s", path);
  const Json& rebuild = json.contains("rebuild") ? json.at("rebuild") : Json();
  if (!rebuild.is_array())
    throw runtime::InputError(path + ": time profile field 'rebuild' must be an array");
  for (const Json& r : rebuild) {
    if (!r.is_object())
      throw runtime::InputError(path + ": each 'rebuild' item is an object {entry, seconds}");
    p.rebuild.push_back({field<std::string>(r, "entry", path), seconds_field(r, "seconds", path)});
  }
  p.embedding_head_forward_s = seconds_field(json, "embedding_head_forward_s", path);
  p.embedding_head_backward_s = seconds_field(json, "embedding_head_backward_s", path);
  p.optimizer_s_per_param = seconds_field(json, "optimizer_s_per_param", path);
  p.ranks = field<int64_t>(json, "ranks", path);
  if (p.ranks < 1)
    throw runtime::InputError(
        TRAINER_STR(path << ": time profile field 'ranks' must be >= 1, got " << p.ranks));
  p.collectives_measured = field<bool>(json, "collectives_measured", path);
  return p;
}

}  // namespace trainer
