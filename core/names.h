#pragma once
/// Mapping names to enums at the edge, and "did you mean" suggestions for unknown names.

#include <string>
#include <string_view>
#include <vector>

namespace parallax {

/// Levenshtein distance, case-insensitive.
int edit_distance(std::string_view a, std::string_view b);

/// The closest candidate to `name`, or "" if none is reasonably close.
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

/// "unknown model 'lama-70b'" style hint: "did you mean 'llama2-70b'? valid: a, b, c".
std::string unknown_name_hint(std::string_view name, const std::vector<std::string>& candidates);

/// Joins with a separator.
std::string join(const std::vector<std::string>& items, std::string_view sep);

}  // namespace parallax
