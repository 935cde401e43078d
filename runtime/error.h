// Errors of the trainer: typed user errors, internal asserts, and one check-macro
// family for library calls. User mistakes throw ConfigError/InputError naming the
// YAML path and values; internal bugs fail TRAINER_ASSERT. main() catches and aborts the job.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace runtime {

// Base of every error the trainer reports to a user.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A configuration value is wrong; `path` is the YAML path ("model.hidden_size").
class ConfigError : public Error {
 public:
  ConfigError(const std::string& path, const std::string& message)
      : Error(path + ": " + message), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Bad input that is not configuration: a dataset, a checkpoint, a command line.
class InputError : public Error {
 public:
  using Error::Error;
};

// A library or device call failed (MPI, BLAS, CUDA, NCCL, the OS).
class LibraryError : public Error {
 public:
  using Error::Error;
};

// The rank printed in error messages; set once at startup by the trainer.
void set_error_rank(int rank);
int error_rank();

[[noreturn]] void assert_fail(const char* expression, const char* file, int line,
                              const std::string& message);
[[noreturn]] void library_fail(const char* library, const char* statement, const char* file,
                               int line, const std::string& library_message);

// Builds a message from stream pieces: TRAINER_STR("n=" << n).
#define TRAINER_STR(pieces) \
  (static_cast<std::ostringstream&&>(std::ostringstream() << pieces).str())

// Internal invariant; a failure is a bug in the trainer, not in the user's input.
#define TRAINER_ASSERT(cond, pieces)                                                     \
  do {                                                                                   \
    if (!(cond)) ::runtime::assert_fail(#cond, __FILE__, __LINE__, TRAINER_STR(pieces)); \
  } while (0)

// The one macro behind every library check: `ok(status)` says success and
// `describe(status)` returns the library's own error string.
#define TRAINER_LIBRARY_CHECK(library, statement, ok, describe)                                    \
  do {                                                                                             \
    auto trainer_status_ = (statement);                                                            \
    if (!(ok(trainer_status_)))                                                                    \
      ::runtime::library_fail(library, #statement, __FILE__, __LINE__, describe(trainer_status_)); \
  } while (0)

}  // namespace runtime
