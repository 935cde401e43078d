// version.h's strings, from compile definitions set in trainer/CMakeLists.txt.
#include "trainer/util/version.h"

namespace trainer {

const char* version() {
  return TRAINER_VERSION;
}

const char* git_revision() {
  return TRAINER_GIT_REVISION;
}

}  // namespace trainer
