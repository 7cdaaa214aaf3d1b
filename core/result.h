#pragma once
/// Result<T> and Diagnostic: how expected failures (bad input, impossible plans, out of memory)
/// travel through the library. Programmer errors use PX_CHECK instead.

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace parallax {

/// One problem found in the input: `where: what (hint: ...)`.
struct Diagnostic {
  std::string where;  ///< a file, JSON pointer or flag, e.g. "llama.json:/model/heads" or "--tp"
  std::string what;   ///< "tp=3 must divide heads=64"
  std::string hint;   ///< "tp in {1,2,4,8}"; may be empty

  std::string str() const {
    std::string s = where.empty() ? what : where + ": " + what;
    if (!hint.empty()) s += " (hint: " + hint + ")";
    return s;
  }
};

/// A list of diagnostics; every validator appends all problems it finds, not only the first.
using Diagnostics = std::vector<Diagnostic>;

/// Either a value or a non-empty list of diagnostics.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}       // NOLINT: implicit by design
  Result(Diagnostic d) : errors_{std::move(d)} {}     // NOLINT
  Result(Diagnostics ds) : errors_(std::move(ds)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const { return *value_; }
  const T* operator->() const { return &*value_; }
  const Diagnostics& errors() const { return errors_; }

  /// All diagnostics, one per line.
  std::string error_text() const {
    std::string s;
    for (const auto& d : errors_) s += d.str() + "\n";
    return s;
  }

 private:
  std::optional<T> value_;
  Diagnostics errors_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& msg);

}  // namespace parallax

/// Always-on invariant check for programmer errors; aborts with file:line.
#define PX_CHECK(cond, msg)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::ostringstream px_check_os_;                                         \
      px_check_os_ << msg;                                                     \
      ::parallax::check_failed(__FILE__, __LINE__, #cond, px_check_os_.str()); \
    }                                                                          \
  } while (0)
