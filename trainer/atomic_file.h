// Writing a whole file so that a reader never sees part of it: into `path`.tmp, then a rename
// over `path` (atomic on POSIX file systems). A failure is an InputError naming the file.
#pragma once

#include <string>

namespace trainer {

void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace trainer
