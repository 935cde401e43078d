#include "trainer/util/format_bytes.h"

#include <cstdio>

namespace trainer {

std::string format_bytes(int64_t bytes) {
  char buffer[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buffer, sizeof buffer, "%.1f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(buffer, sizeof buffer, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  return buffer;
}

}  // namespace trainer
