// Formatting of internal-assert and library-call failures, with the rank prefix.
#include "runtime/error.h"

namespace runtime {
namespace {
int g_error_rank = 0;  // process-wide: one rank per process
}

void set_error_rank(int rank) { g_error_rank = rank; }
int error_rank() { return g_error_rank; }

void assert_fail(const char* expression, const char* file, int line, const std::string& message) {
  throw std::logic_error(TRAINER_STR("[rank " << g_error_rank << "] internal error: " << expression
                                              << " failed at " << file << ":" << line << ": "
                                              << message));
}

void library_fail(const char* library, const char* statement, const char* file, int line,
                  const std::string& library_message) {
  throw LibraryError(TRAINER_STR("[rank " << g_error_rank << "] " << library << " call `"
                                          << statement << "` failed at " << file << ":" << line
                                          << ": " << library_message));
}

}  // namespace runtime
