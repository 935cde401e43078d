// Sharded safetensors checkpoints (safetensors_index.h).
#include "trainer/export/safetensors_index.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "runtime/error.h"
#include "trainer/export/json_object.h"

namespace trainer {

SafetensorsFile read_safetensors_shards(const std::string& index_path, SafetensorsRead read) {
  std::ifstream in(index_path);
  if (!in) throw runtime::InputError(index_path + ": cannot open the safetensors index");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const YAML::Node root =
      load_json_object(text, index_path, "not JSON", "not a JSON object (a safetensors index)");
  const YAML::Node map = root["weight_map"];
  if (!map || !map.IsMap() || map.size() == 0)
    throw runtime::InputError(index_path + ": no \"weight_map\" object of tensor -> shard file");
  std::map<std::string, std::set<std::string>> by_shard;  // shard file -> the tensors it holds
  for (const auto& entry : map) {
    if (!entry.second.IsScalar() || entry.second.Scalar().empty())
      throw runtime::InputError(index_path + ": weight_map[\"" + entry.first.Scalar() +
                                "\"] is not a shard file name");
    by_shard[entry.second.Scalar()].insert(entry.first.Scalar());
  }
  const std::filesystem::path dir = std::filesystem::path(index_path).parent_path();
  SafetensorsFile merged;
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    SafetensorsFile file = read_safetensors(shard_path, read);
    for (const std::string& name : names) {
      auto found = file.tensors.find(name);
      if (found == file.tensors.end())
        throw runtime::InputError(index_path + ": tensor '" + name + "' is mapped to " + shard +
                                  ", which does not hold it");
      if (!merged.tensors.emplace(name, std::move(found->second)).second)
        throw runtime::InputError(index_path + ": tensor '" + name + "' is in two shards");
    }
  }
  return merged;
}

std::optional<std::string> hf_weights_in(const std::string& dir) {
  for (const char* name : {"model.safetensors", "model.safetensors.index.json"}) {
    const std::filesystem::path file = std::filesystem::path(dir) / name;
    if (std::filesystem::exists(file)) return file.string();
  }
  return std::nullopt;
}

std::string hf_weights_path(const std::string& path) {
  if (!std::filesystem::is_directory(path)) return path;
  if (std::optional<std::string> weights = hf_weights_in(path)) return *weights;
  throw runtime::InputError(
      path + ": a directory without model.safetensors or model.safetensors.index.json");
}

SafetensorsFile read_hf_weights(const std::string& given, SafetensorsRead read) {
  const std::string path = hf_weights_path(given);
  const std::string suffix = ".safetensors.index.json";
  const bool index = path.size() >= suffix.size() &&
                     path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  return index ? read_safetensors_shards(path, read) : read_safetensors(path, read);
}

}  // namespace trainer
