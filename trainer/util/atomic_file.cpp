// The temporary file and the rename.
#include "trainer/util/atomic_file.h"

#include <filesystem>
#include <fstream>

#include "runtime/error.h"

namespace trainer {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error)
      throw runtime::InputError("cannot write " + path + ": cannot make the folder " +
                                folder.string() + ": " + error.message());
  }
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.flush();
    if (!file) throw runtime::InputError("cannot write " + path + " (through " + temporary + ")");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    throw runtime::InputError("cannot rename " + temporary + " to " + path + ": " +
                              error.message());
}

}  // namespace trainer
