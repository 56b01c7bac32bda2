// The one internal-assert failure path: an ember bug, not a user error.
#include "ember/errors.h"

namespace ember::detail {

void assert_failed(const char* expr, const char* file, int line) {
  throw Error(cat("Internal assert failed at ", file, ":", line, ": ", expr,
                  ". This is a bug in ember; please report a bug to ember."));
}

}  // namespace ember::detail
