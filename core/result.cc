#include "core/result.h"

#include <cstdio>
#include <cstdlib>

namespace parallax {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: internal check failed: %s: %s\n", file, line, cond, msg.c_str());
  std::abort();
}

}  // namespace parallax
