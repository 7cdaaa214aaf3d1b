#include "core/names.h"

#include <algorithm>
#include <cctype>

namespace parallax {

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
  // No name is this long: the input is not a misspelling, and comparing it would cost
  // |name| x |candidate| steps each.
  if (name.size() > 256) return "";
  // A candidate that contains the name (or the reverse) is the strongest hint, the shortest
  // such first; otherwise the smallest edit distance within a limit.
  std::string ln(name);
  std::transform(ln.begin(), ln.end(), ln.begin(), ::tolower);
  std::string best;
  double best_d = 1e9;
  for (const auto& c : candidates) {
    std::string lc = c;
    std::transform(lc.begin(), lc.end(), lc.begin(), ::tolower);
    double d = edit_distance(ln, lc);
    const bool contains =
        !ln.empty() && (lc.find(ln) != std::string::npos || ln.find(lc) != std::string::npos);
    if (contains) d = 0.5 + 1e-3 * static_cast<double>(lc.size());
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const double limit = std::max<double>(3, static_cast<double>(name.size()) / 2);
  return best_d <= limit ? best : "";
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += sep;
    s += items[i];
  }
  return s;
}

std::string unknown_name_hint(std::string_view name, const std::vector<std::string>& candidates) {
  std::string near = nearest_name(name, candidates);
  std::string s = near.empty() ? "" : "did you mean '" + near + "'? ";
  return s + "valid: " + join(candidates, ", ");
}

}  // namespace parallax
