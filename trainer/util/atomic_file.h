// Writing a whole file so that a reader never sees part of it: into `path`.tmp, then a rename
// over `path` (atomic on POSIX file systems). Missing folders of `path` are created. A failure
// is an InputError naming the file (or the folder that could not be made).
#pragma once

#include <string>

namespace trainer {

void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace trainer
