#pragma once
/// The one parsing layer every JSON and JSON Lines input goes through: parse failures, number
/// overflow, nesting too deep, duplicated keys, wrong types and out-of-range values all become
/// located diagnostics (file, line and column, or file and JSON pointer); nothing throws.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace parallax {

using Json = nlohmann::json;

/// The deepest nesting accepted. Parallax's own files nest five levels at most and a Hugging
/// Face config.json about four; the bound keeps every recursive walk of a value (printing,
/// copying, destroying) far from the stack's end.
inline constexpr int kMaxJsonDepth = 64;

/// Parses text; every failure names `where`, line and column (lines counted from `first_line`,
/// for a record that starts on that line of a larger file). Refused: malformed JSON, a number
/// that overflows a double, nesting deeper than kMaxJsonDepth, a key given twice in one object
/// (reported with its JSON pointer).
Result<Json> parse_json(std::string_view text, const std::string& where, int first_line = 1);

/// `s` for an error message: control characters escaped (\n, \x1b, ...), cut to about
/// `max_chars` with the total size said, so one bad value cannot flood a terminal. With
/// `keep_layout`, line breaks and tabs stay as they are (a whole message, not one value).
std::string text_excerpt(std::string_view s, size_t max_chars = 80, bool keep_layout = false);
/// A JSON value for an error message: its compact text through text_excerpt (containers larger
/// than the excerpt are described by type and size, never printed whole).
std::string json_excerpt(const Json& v, size_t max_chars = 80);

/// The string at `key` of object `o`; `fallback` when `o` is no object, lacks the key, or holds
/// another type there. For reading files whose fields are checked elsewhere or not at all.
std::string text_at(const Json& o, const char* key, const std::string& fallback = "");

/// Collects typed fields from a JSON object, recording a diagnostic for each missing or mistyped
/// one. Numbers in hw profiles may be {"value": x, "source": "..."}; `sources()` keeps the texts.
class JsonFields {
 public:
  JsonFields(const Json& obj, std::string where, Diagnostics* out);
  bool has(const char* key) const;
  /// Required fields record "missing" when absent; optional ones keep `fallback`. Integers must
  /// fit in 32 bits (every count Parallax reads is stored as int somewhere).
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt);
  /// An integer in [lo, hi]; outside it the diagnostic names the range and `why`.
  int64_t integer_in(const char* key, int64_t lo, int64_t hi, const char* why,
                     std::optional<int64_t> fallback = std::nullopt);
  double number(const char* key, std::optional<double> fallback = std::nullopt);
  /// A number in [lo, hi]; outside it the diagnostic names the range and `why`.
  double number_in(const char* key, double lo, double hi, const char* why,
                   std::optional<double> fallback = std::nullopt);
  bool boolean(const char* key, std::optional<bool> fallback = std::nullopt);
  std::string string(const char* key, std::optional<std::string> fallback = std::nullopt);
  /// A name shown on terminals and in launch files: printable, at most 200 bytes.
  std::string name(const char* key, std::optional<std::string> fallback = std::nullopt);
  const Json* object(const char* key) const;  ///< nullptr when absent or null
  /// An array; nullptr when absent or null, and after a diagnostic when not an array.
  const Json* array(const char* key);
  /// Reports each key of the object not in `known`, with the nearest known name.
  void reject_unknown(const std::vector<std::string>& known);
  std::string path(const char* key) const { return where_ + "/" + key; }
  const std::map<std::string, std::string>& sources() const { return sources_; }

 private:
  const Json* value(const char* key, bool required);
  const Json& obj_;
  std::string where_;
  Diagnostics* out_;
  std::map<std::string, std::string> sources_;
};

/// Whether `s` is a name fit for a terminal: non-empty, at most 200 bytes, no control characters.
/// Otherwise the reason.
std::optional<std::string> bad_name(std::string_view s);

}  // namespace parallax
