// load_json_object: a JSON object must start with '{' (YAML would read a bare scalar or list),
// parse, and be a map.
#include "trainer/export/json_object.h"

#include "runtime/error.h"

namespace trainer {

YAML::Node load_json_object(const std::string& text, const std::string& path,
                            const std::string& not_json, const std::string& not_object) {
  auto fail = [&](const std::string& why) {
    throw runtime::InputError(path + ": " + not_json + ": " + why);
  };
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') fail(not_object);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    fail(error.what());
  }
  if (!root.IsMap()) fail(not_object);
  return root;
}

}  // namespace trainer
