// YAML text <-> Config: parse a document (+ "a.b=c" overrides, applied in order
// after the file), validate the result, and write the effective config back as
// YAML that parses to the same Config. All user errors are runtime::ConfigError.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "trainer/config/config.h"
#include "trainer/config/fields.h"

namespace trainer {
namespace {

using runtime::ConfigError;

// "invalid YAML at 3:7: <yaml-cpp's message>" (1-based line:column).
std::string parser_message(const YAML::Exception& error) {
  if (error.mark.is_null()) return "invalid YAML: " + error.msg;
  return TRAINER_STR("invalid YAML at " << error.mark.line + 1 << ":" << error.mark.column + 1
                                        << ": " << error.msg);
}

// The one document of `text` (null when empty); `source` names it in errors.
YAML::Node load_document(const std::string& text, const std::string& source) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& error) {
    throw ConfigError(source, parser_message(error));
  }
  if (documents.size() > 1) {
    throw ConfigError(source, TRAINER_STR("expected one YAML document, got " << documents.size()));
  }
  return documents.empty() ? YAML::Node() : documents.front();
}

// The ConfigError's message without its "<path>: " prefix.
std::string message_of(const ConfigError& error) {
  return std::string(error.what()).substr(error.path().size() + 2);
}

// {keys[index]: {keys[index + 1]: ... value}}
YAML::Node nest(const std::vector<std::string>& keys, size_t index, const YAML::Node& value) {
  if (index == keys.size()) return value;
  YAML::Node map(YAML::NodeType::Map);
  map[keys[index]] = nest(keys, index + 1, value);
  return map;
}

// "a.b=c": c is parsed as YAML and read as if the file had said `a: {b: c}`, so
// the key path and the value go through the same checks as the file's.
void apply_override(const std::string& text, Config& config) {
  const size_t equals = text.find('=');
  if (equals == std::string::npos) {
    throw ConfigError("--set", "expected KEY=VALUE (e.g. train.seed=7), got '" + text + "'");
  }
  // The key path, without the spaces of "a.b = c".
  const size_t first = text.find_first_not_of(' ');
  const size_t last = text.find_last_not_of(' ', equals == 0 ? 0 : equals - 1);
  const std::string path =
      first < equals && last != std::string::npos ? text.substr(first, last - first + 1) : "";
  std::vector<std::string> keys;
  for (size_t begin = 0;;) {
    const size_t dot = path.find('.', begin);
    keys.push_back(path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (keys.back().empty()) {
      throw ConfigError("--set", "empty key in '" + text + "' (expected section.key=value)");
    }
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(equals + 1));
  } catch (const YAML::Exception& error) {
    throw ConfigError(path, parser_message(error) + " (in --set '" + text + "')");
  }
  try {
    config_detail::read_config(nest(keys, 0, value), config);
  } catch (const ConfigError& error) {
    throw ConfigError(error.path(), message_of(error) + " (in --set '" + text + "')");
  }
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides, ConfigUse use) {
  const YAML::Node root = load_document(yaml_text, source);
  if (!root.IsNull() && !root.IsMap()) {
    throw ConfigError(source, "the top level must be a map of sections (model, train, ...), got " +
                                  config_detail::describe(root));
  }
  // model.architecture sets the defaults the other fields override: read once to learn it
  // (the file, then the overrides), then again over that architecture's defaults.
  Config config;
  config_detail::read_config(root, config);
  for (const std::string& text : overrides) apply_override(text, config);
  if (config.model.architecture != model::Architecture::gpt2) {
    const model::Architecture architecture = config.model.architecture;
    config = Config();
    config.model = model::architecture_defaults(architecture);
    config_detail::read_config(root, config);
    for (const std::string& text : overrides) apply_override(text, config);
  }
  if (config.train.precision == Precision::automatic) {  // written out (config.yaml) resolved
    config.train.precision = uses_bf16(config.train) ? Precision::bf16 : Precision::fp32;
  }
  validate_config(config, use);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   ConfigUse use) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw ConfigError(path, "is a directory, not a config file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path, std::string("cannot open the config file: ") + std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw ConfigError(path, "cannot read the config file");
  return parse_config(text, path, overrides, use);
}

std::string recompute_yaml(const recompute::RecomputeConfig& recompute) {
  YAML::Emitter out;
  config_detail::write_recompute(out, recompute);
  TRAINER_ASSERT(out.good(), "YAML emitter failed: " << out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

std::string model_yaml(const model::GptConfig& model) {
  YAML::Emitter out;
  config_detail::write_model(out, model);
  TRAINER_ASSERT(out.good(), "YAML emitter failed: " << out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

std::string to_yaml(const Config& config) {
  YAML::Emitter out;
  config_detail::write_config(out, config);
  TRAINER_ASSERT(out.good(), "YAML emitter failed: " << out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace trainer
