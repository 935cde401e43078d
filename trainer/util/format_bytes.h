// Byte counts as people read them in logs and tables.
#pragma once

#include <cstdint>
#include <string>

namespace trainer {

std::string format_bytes(int64_t bytes);  // "12.3 MiB"

}  // namespace trainer
