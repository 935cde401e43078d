// The trainer's version and the git revision it was configured from (CMake sets both when it
// configures; the revision is "unknown" outside a git checkout).
#pragma once

namespace trainer {

const char* version();       // "0.1.0", the CMake project version
const char* git_revision();  // "1a2b3c4d5e6f" (12 hex digits), or "unknown"

}  // namespace trainer
