// Internal to the config layer: the table machinery that reads YAML nodes into the
// config structs and writes them back. A struct becomes a YAML map by specializing
// ConfigSchema<T>, an enum by specializing EnumNames<E>, any other type ValueCodec<T>.
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/gpt_config.h"
#include "parallel/core/parallel_config.h"
#include "runtime/error.h"
#include "trainer/config/config.h"

namespace trainer::config_detail {

// One YAML key of the struct Owner: how to read it from a node (at YAML path
// `path`, into owner) and how to write it (the value only; the caller writes the
// key). Built by field() below, or by hand for a key that is not one member
// (e.g. `range: [first, last]` filling two members).
template <class Owner>
struct FieldSpec {
  std::string key;
  std::function<void(const YAML::Node& node, const std::string& path, Owner& owner)> read;
  std::function<void(YAML::Emitter& out, const Owner& owner)> write;
};

// Specialize with `static const std::vector<FieldSpec<T>>& fields();` (keys in
// the order to_yaml writes them) to make T a YAML map.
template <class T>
struct ConfigSchema {};
template <class T>
concept ConfigStruct = requires {
  ConfigSchema<T>::fields();
};

// Specialize with `static constexpr std::array<std::pair<std::string_view, E>, N> entries`.
template <class E>
struct EnumNames {};
template <class E>
concept ConfigEnum = requires {
  EnumNames<E>::entries;
};

// How values of type T are read and written:
//   static void read(const YAML::Node& node, const std::string& path, T& value);
//   static void write(YAML::Emitter& out, const T& value);
// Provided below for scalars, enums, lists, optionals and ConfigStruct maps.
template <class T>
struct ValueCodec;

template <class T>
void read_value(const YAML::Node& node, const std::string& path, T& value) {
  ValueCodec<T>::read(node, path, value);
}
template <class T>
void write_value(YAML::Emitter& out, const T& value) {
  ValueCodec<T>::write(out, value);
}

// "'abc'", "a map", "a list" or "null": what a node holds, for messages.
std::string describe(const YAML::Node& node);
// The shortest text that parses back to exactly this value ("0.001", "1e-08", ".inf").
std::string format_number(double value);
std::string format_number(float value);
// "a.b" from "a" and "b"; just "b" at the top level (empty parent).
std::string join_path(const std::string& parent, const std::string& key);

// The table entry for `key: owner.*member`.
template <class Owner, class Value>
FieldSpec<Owner> field(std::string key, Value Owner::*member) {
  return {std::move(key),
          [member](const YAML::Node& node, const std::string& path, Owner& owner) {
            read_value(node, path, owner.*member);
          },
          [member](YAML::Emitter& out, const Owner& owner) { write_value(out, owner.*member); }};
}

// The table entry for `key: owner.*outer.*member`: a member of a nested struct
// written flat in the owner's map.
template <class Owner, class Inner, class Value>
FieldSpec<Owner> field(std::string key, Inner Owner::*outer, Value Inner::*member) {
  return {std::move(key),
          [outer, member](const YAML::Node& node, const std::string& path, Owner& owner) {
            read_value(node, path, owner.*outer.*member);
          },
          [outer, member](YAML::Emitter& out, const Owner& owner) {
            write_value(out, owner.*outer.*member);
          }};
}

// ---- scalars (fields.cpp): integers reject fractions and overflow,
// booleans are true/false only, strings are written quoted ----
void read_scalar(const YAML::Node& node, const std::string& path, int64_t& value);
void read_scalar(const YAML::Node& node, const std::string& path, uint64_t& value);
void read_scalar(const YAML::Node& node, const std::string& path, float& value);
void read_scalar(const YAML::Node& node, const std::string& path, double& value);
void read_scalar(const YAML::Node& node, const std::string& path, bool& value);
void read_scalar(const YAML::Node& node, const std::string& path, std::string& value);
void write_scalar(YAML::Emitter& out, int64_t value);
void write_scalar(YAML::Emitter& out, uint64_t value);
void write_scalar(YAML::Emitter& out, float value);
void write_scalar(YAML::Emitter& out, double value);
void write_scalar(YAML::Emitter& out, bool value);
void write_scalar(YAML::Emitter& out, const std::string& value);

template <class T>
concept ConfigScalar =
    std::same_as<T, int64_t> || std::same_as<T, uint64_t> || std::same_as<T, float> ||
    std::same_as<T, double> || std::same_as<T, bool> || std::same_as<T, std::string>;

template <ConfigScalar T>
struct ValueCodec<T> {
  static void read(const YAML::Node& node, const std::string& path, T& value) {
    read_scalar(node, path, value);
  }
  static void write(YAML::Emitter& out, const T& value) { write_scalar(out, value); }
};

template <ConfigEnum E>
std::string_view enum_name(E value) {
  for (const auto& [name, entry] : EnumNames<E>::entries) {
    if (entry == value) return name;
  }
  TRAINER_ASSERT(false, "enum value " << static_cast<int64_t>(value) << " has no name");
  return {};
}

template <ConfigEnum E>
struct ValueCodec<E> {
  static void read(const YAML::Node& node, const std::string& path, E& value) {
    std::string allowed;
    for (const auto& [name, entry] : EnumNames<E>::entries) {
      if (node.IsScalar() && node.Scalar() == name) {
        value = entry;
        return;
      }
      allowed += (allowed.empty() ? "" : ", ") + std::string(name);
    }
    throw runtime::ConfigError(path, "expected one of " + allowed + ", got " + describe(node));
  }
  static void write(YAML::Emitter& out, const E& value) { out << std::string(enum_name(value)); }
};

// Items are read at "path[i]"; a list replaces the whole previous value.
template <class T>
struct ValueCodec<std::vector<T>> {
  static void read(const YAML::Node& node, const std::string& path, std::vector<T>& value) {
    if (!node.IsSequence()) {
      throw runtime::ConfigError(path, "expected a list, got " + describe(node));
    }
    std::vector<T> items(node.size());
    size_t index = 0;
    for (const YAML::Node& item : node) {
      read_value(item, path + "[" + std::to_string(index) + "]", items[index]);
      ++index;
    }
    value = std::move(items);
  }
  static void write(YAML::Emitter& out, const std::vector<T>& value) {
    if constexpr (!ConfigStruct<T>) out << YAML::Flow;  // [98, 2]; lists of maps stay in block
    out << YAML::BeginSeq;
    for (const T& item : value) write_value(out, item);
    out << YAML::EndSeq;
  }
};

// null (`key:` or `key: ~`) is "not set"; to_yaml writes an unset value as ~.
template <class T>
struct ValueCodec<std::optional<T>> {
  static void read(const YAML::Node& node, const std::string& path, std::optional<T>& value) {
    if (node.IsNull()) {
      value.reset();
      return;
    }
    T item{};
    read_value(node, path, item);
    value = std::move(item);
  }
  static void write(YAML::Emitter& out, const std::optional<T>& value) {
    if (value) {
      write_value(out, *value);
    } else {
      out << YAML::Null;
    }
  }
};

// Assigns the keys present in `node` and keeps the others: a file fills a
// default-constructed struct, and a --set override updates a parsed one.
template <ConfigStruct T>
struct ValueCodec<T> {
  static void read(const YAML::Node& node, const std::string& path, T& value) {
    if (node.IsNull()) return;  // `section:` with nothing under it keeps the defaults
    if (!node.IsMap()) throw runtime::ConfigError(path, "expected a map, got " + describe(node));
    const auto& fields = ConfigSchema<T>::fields();
    std::vector<std::string> seen_keys;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        throw runtime::ConfigError(path,
                                   "expected key names, got the key " + describe(entry.first));
      }
      const std::string& key = entry.first.Scalar();
      const std::string key_path = join_path(path, key);
      for (const std::string& seen : seen_keys) {
        if (seen == key) throw runtime::ConfigError(key_path, "duplicate key");
      }
      seen_keys.push_back(key);
      const FieldSpec<T>* match = nullptr;
      std::string known;
      for (const FieldSpec<T>& spec : fields) {
        if (spec.key == key) match = &spec;
        known += (known.empty() ? "" : ", ") + spec.key;
      }
      if (match == nullptr) {
        throw runtime::ConfigError(key_path, "unknown key (known: " + known + ")");
      }
      match->read(entry.second, key_path, value);
    }
  }
  static void write(YAML::Emitter& out, const T& value) {
    out << YAML::BeginMap;
    for (const FieldSpec<T>& spec : ConfigSchema<T>::fields()) {
      out << YAML::Key << spec.key << YAML::Value;
      spec.write(out, value);
    }
    out << YAML::EndMap;
  }
};

// ---- the config's enums ----
template <>
struct EnumNames<model::Architecture> {
  static constexpr std::array<std::pair<std::string_view, model::Architecture>, 2> entries{
      {{"gpt2", model::Architecture::gpt2}, {"llama", model::Architecture::llama}}};
};
template <>
struct EnumNames<runtime::RopeScalingType> {
  static constexpr std::array<std::pair<std::string_view, runtime::RopeScalingType>, 2> entries{
      {{"llama3", runtime::RopeScalingType::llama3}, {"yarn", runtime::RopeScalingType::yarn}}};
};
template <>
struct EnumNames<model::Normalization> {
  static constexpr std::array<std::pair<std::string_view, model::Normalization>, 2> entries{
      {{"layernorm", model::Normalization::layernorm}, {"rmsnorm", model::Normalization::rmsnorm}}};
};
template <>
struct EnumNames<model::Activation> {
  static constexpr std::array<std::pair<std::string_view, model::Activation>, 3> entries{
      {{"gelu_tanh", model::Activation::gelu_tanh},
       {"gelu", model::Activation::gelu},
       {"swiglu", model::Activation::swiglu}}};
};
template <>
struct EnumNames<model::PositionEmbedding> {
  static constexpr std::array<std::pair<std::string_view, model::PositionEmbedding>, 2> entries{
      {{"learned", model::PositionEmbedding::learned}, {"rope", model::PositionEmbedding::rope}}};
};
template <>
struct EnumNames<model::AttentionBackend> {
  static constexpr std::array<std::pair<std::string_view, model::AttentionBackend>, 2> entries{
      {{"unfused", model::AttentionBackend::unfused}, {"flash", model::AttentionBackend::flash}}};
};
template <>
struct EnumNames<Device> {
  static constexpr std::array<std::pair<std::string_view, Device>, 2> entries{
      {{"cpu", Device::cpu}, {"cuda", Device::cuda}}};
};
template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::pair<std::string_view, Precision>, 3> entries{
      {{"auto", Precision::automatic}, {"fp32", Precision::fp32}, {"bf16", Precision::bf16}}};
};
template <>
struct EnumNames<OnNonfinite> {
  static constexpr std::array<std::pair<std::string_view, OnNonfinite>, 2> entries{
      {{"stop", OnNonfinite::stop}, {"skip_step", OnNonfinite::skip_step}}};
};
template <>
struct EnumNames<PlanObjective> {
  static constexpr std::array<std::pair<std::string_view, PlanObjective>, 2> entries{
      {{"time", PlanObjective::time}, {"flops", PlanObjective::flops}}};
};
template <>
struct EnumNames<GuardAction> {
  static constexpr std::array<std::pair<std::string_view, GuardAction>, 4> entries{
      {{"off", GuardAction::off},
       {"warn", GuardAction::warn},
       {"skip_step", GuardAction::skip_step},
       {"rewind", GuardAction::rewind}}};
};
template <>
struct EnumNames<TargetAction> {
  static constexpr std::array<std::pair<std::string_view, TargetAction>, 2> entries{
      {{"warn", TargetAction::warn}, {"checkpoint_and_stop", TargetAction::checkpoint_and_stop}}};
};
template <>
struct EnumNames<DecayStyle> {
  static constexpr std::array<std::pair<std::string_view, DecayStyle>, 5> entries{
      {{"constant", DecayStyle::constant},
       {"linear", DecayStyle::linear},
       {"cosine", DecayStyle::cosine},
       {"inverse_square_root", DecayStyle::inverse_square_root},
       {"wsd", DecayStyle::wsd}}};
};
// output.export_dtype: the names of config.json's torch_dtype.
template <>
struct EnumNames<runtime::DType> {
  static constexpr std::array<std::pair<std::string_view, runtime::DType>, 2> entries{
      {{"float32", runtime::DType::f32}, {"bfloat16", runtime::DType::bf16}}};
};

template <>
struct EnumNames<WsdDecayStyle> {
  static constexpr std::array<std::pair<std::string_view, WsdDecayStyle>, 4> entries{
      {{"exponential", WsdDecayStyle::exponential},
       {"linear", WsdDecayStyle::linear},
       {"cosine", WsdDecayStyle::cosine},
       {"minus_sqrt", WsdDecayStyle::minus_sqrt}}};
};
template <>
struct EnumNames<parallel::CommBackend> {
  static constexpr std::array<std::pair<std::string_view, parallel::CommBackend>, 3> entries{
      {{"auto", parallel::CommBackend::automatic},
       {"mpi", parallel::CommBackend::mpi},
       {"nccl", parallel::CommBackend::nccl}}};
};

// ---- entry points of the schema tables (schema.cpp) ----
// Reads a top-level map (or null: nothing) over `config`; unknown keys throw.
void read_config(const YAML::Node& root, Config& config);
void write_config(YAML::Emitter& out, const Config& config);
void write_recompute(YAML::Emitter& out, const recompute::RecomputeConfig& recompute);
void write_model(YAML::Emitter& out, const model::GptConfig& model);

}  // namespace trainer::config_detail
