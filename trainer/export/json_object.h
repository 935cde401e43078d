// JSON objects read with yaml-cpp (JSON is YAML's flow syntax): the one reader behind the
// safetensors header and the checkpoint manifest.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace trainer {

// `text` as a YAML map, when it holds one JSON object. Otherwise throws InputError
// "<path>: <not_json>: <why>", `why` being yaml-cpp's message or `not_object`.
YAML::Node load_json_object(const std::string& text, const std::string& path,
                            const std::string& not_json, const std::string& not_object);

}  // namespace trainer
