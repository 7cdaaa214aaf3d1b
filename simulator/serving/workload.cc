#include "simulator/serving/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <utility>

#include "core/json_read.h"
#include "core/parallel_plan.h"
#include "core/text.h"

namespace parallax::serving {
namespace {

/// A column of a trace: its canonical name and every accepted spelling, canonical first.
struct Field {
  std::vector<const char*> names;
  bool integer;  ///< lengths are token counts; the arrival is a real number of seconds
};

enum FieldIndex { kArrival = 0, kPrompt = 1, kOutput = 2, kNumFields = 3 };

const std::vector<Field>& trace_fields() {
  static const std::vector<Field> fields = {
      {{"arrival_s", "timestamp"}, false},
      {{"prompt_len", "input_len", "prompt_tokens", "input_length"}, true},
      {{"output_len", "output_tokens", "output_length"}, true},
  };
  return fields;
}

std::string accepted_names(const Field& f) {
  std::string s;
  for (const char* n : f.names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

std::string show(double v) { return format_number("%.10g", v); }

/// Text shown after "got": cut so one bad line cannot flood the report.
std::string excerpt(std::string_view s) { return text_excerpt(s, 60); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

/// One line of the trace with its 1-based number.
struct Line {
  int64_t number;
  std::string_view text;
};

std::vector<Line> non_blank_lines(std::string_view text) {
  std::vector<Line> lines;
  int64_t number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++number;
    std::string_view line = trim(text.substr(pos, end - pos));
    if (!line.empty()) lines.push_back({number, line});
    pos = end + 1;
  }
  return lines;
}

/// Checks one value of `field` (spelled `name` in the trace) and stores it in `out`.
void check_value(const Field& field, const std::string& name, double v, const std::string& where,
                 Diagnostics* errors, double* out) {
  if (field.integer) {
    // The longest context a layout may have (core/parallel_plan.h); a longer prompt is a typo.
    if (!std::isfinite(v) || v < 1 || v != std::floor(v) || v > kMaxSeqLen) {
      errors->push_back(
          {where,
           name + ": must be an integer in [1, " + std::to_string(kMaxSeqLen) + "], got " + show(v),
           ""});
      return;
    }
  } else if (!std::isfinite(v) || v < 0) {
    errors->push_back(
        {where, name + ": must be a finite number >= 0 (seconds), got " + show(v), ""});
    return;
  }
  *out = v;
}

/// Appends the request when all three fields were good.
void add_if_complete(const double (&values)[kNumFields], size_t errors_before,
                     const Diagnostics& errors, std::vector<Request>* out) {
  if (errors.size() != errors_before) return;
  Request r;
  r.id = static_cast<int64_t>(out->size());
  r.arrival_s = values[kArrival];
  r.prompt_len = static_cast<int64_t>(values[kPrompt]);
  r.output_len = static_cast<int64_t>(values[kOutput]);
  out->push_back(r);
}

/// The `hash_ids` of a JSON trace line into `r`; every bad entry reported.
void parse_hash_ids(const nlohmann::json& j, int64_t hash_block, const std::string& where,
                    Diagnostics* errors, Request* r) {
  if (!j.contains("hash_ids")) return;
  const nlohmann::json& ids = j["hash_ids"];
  if (!ids.is_array()) {
    errors->push_back(
        {where, "hash_ids: must be an array of integers >= 0, got " + json_excerpt(ids), ""});
    return;
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!ids[k].is_number_unsigned()) {
      errors->push_back({where,
                         "hash_ids[" + std::to_string(k) + "]: must be an integer >= 0, got " +
                             json_excerpt(ids[k]),
                         ""});
      return;
    }
    r->prefix_hashes.push_back(ids[k].get<uint64_t>());
  }
  if (!r->prefix_hashes.empty()) r->hash_block = hash_block;
}

/// Keys and columns a trace holds that are not read, each with the line that first had it.
using Ignored = std::map<std::string, std::string>;

/// Whether `key` names a field (in any spelling) or hash_ids.
bool is_trace_key(std::string_view key) {
  if (key == "hash_ids") return true;
  for (const Field& f : trace_fields())
    for (const char* n : f.names)
      if (key == n) return true;
  return false;
}

void parse_json_line(const Line& line, const std::string& source, int64_t hash_block,
                     Diagnostics* errors, Ignored* ignored, std::vector<Request>* out) {
  const std::string where = source + ":" + std::to_string(line.number);
  auto parsed = parse_json(line.text, source, static_cast<int>(line.number));
  if (!parsed) {
    errors->insert(errors->end(), parsed.errors().begin(), parsed.errors().end());
    return;
  }
  const Json& j = parsed.value();
  if (!j.is_object()) {
    errors->push_back({where, "want a JSON object, got " + excerpt(line.text), ""});
    return;
  }
  for (const auto& item : j.items())
    if (!is_trace_key(item.key())) ignored->emplace(item.key(), where);
  const size_t before = errors->size();
  double values[kNumFields] = {0, 0, 0};
  const auto& fields = trace_fields();
  for (int f = 0; f < kNumFields; ++f) {
    const Field& field = fields[f];
    const char* found = nullptr;
    for (const char* n : field.names) {
      if (j.contains(n)) {
        found = n;
        break;
      }
    }
    if (found == nullptr) {
      errors->push_back({where, std::string(field.names[0]) + ": missing",
                         "accepted keys: " + accepted_names(field)});
      continue;
    }
    const nlohmann::json& v = j[found];
    if (!v.is_number()) {
      errors->push_back(
          {where, std::string(found) + ": must be a number, got " + json_excerpt(v), ""});
      continue;
    }
    check_value(field, found, v.get<double>(), where, errors, &values[f]);
  }
  Request prefix;
  parse_hash_ids(j, hash_block, where, errors, &prefix);
  add_if_complete(values, before, *errors, out);
  if (errors->size() == before) {
    out->back().prefix_hashes = std::move(prefix.prefix_hashes);
    out->back().hash_block = prefix.hash_block;
  }
}

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t pos = 0;
  while (true) {
    size_t comma = line.find(',', pos);
    if (comma == std::string_view::npos) {
      cells.push_back(trim(line.substr(pos)));
      return cells;
    }
    cells.push_back(trim(line.substr(pos, comma - pos)));
    pos = comma + 1;
  }
}

std::optional<double> parse_number(std::string_view s) {
  double v = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || ptr != last || first == last) return std::nullopt;
  return v;
}

void parse_csv(const std::vector<Line>& lines, const std::string& source, Diagnostics* errors,
               Ignored* ignored, std::vector<Request>* out) {
  const Line& header = lines.front();
  const std::string header_where = source + ":" + std::to_string(header.number);
  const std::vector<std::string_view> names = split_csv(header.text);
  const auto& fields = trace_fields();
  int column[kNumFields] = {-1, -1, -1};
  for (int f = 0; f < kNumFields; ++f) {
    for (const char* n : fields[f].names) {
      auto it = std::find(names.begin(), names.end(), std::string_view(n));
      if (it != names.end()) {
        column[f] = static_cast<int>(it - names.begin());
        break;
      }
    }
    if (column[f] < 0) {
      errors->push_back(
          {header_where,
           "header: no column " + std::string(fields[f].names[0]) + ", got " + excerpt(header.text),
           "accepted names: " + accepted_names(fields[f])});
    }
  }
  if (!errors->empty()) return;
  for (const std::string_view name : names)
    if (!is_trace_key(name)) ignored->emplace(std::string(name), header_where);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string where = source + ":" + std::to_string(lines[i].number);
    const std::vector<std::string_view> cells = split_csv(lines[i].text);
    if (cells.size() != names.size()) {
      errors->push_back({where,
                         "row: want " + std::to_string(names.size()) +
                             " fields as the header, got " + std::to_string(cells.size()),
                         ""});
      continue;
    }
    const size_t before = errors->size();
    double values[kNumFields] = {0, 0, 0};
    for (int f = 0; f < kNumFields; ++f) {
      const std::string name(names[static_cast<size_t>(column[f])]);
      std::string_view cell = cells[static_cast<size_t>(column[f])];
      std::optional<double> v = parse_number(cell);
      if (!v) {
        errors->push_back({where, name + ": not a number, got '" + excerpt(cell) + "'", ""});
        continue;
      }
      check_value(fields[f], name, *v, where, errors, &values[f]);
    }
    add_if_complete(values, before, *errors, out);
  }
}

}  // namespace

std::vector<Request> poisson_requests(int64_t n, double rate_per_s, int64_t prompt_len,
                                      int64_t output_len, uint64_t seed) {
  PX_CHECK(n >= 0, "poisson_requests: n=" << n);
  std::vector<Request> out;
  out.reserve(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  const bool all_at_once = !(rate_per_s > 0) || std::isinf(rate_per_s);
  double t = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!all_at_once) {
      // u in [0, 1) from the top 53 bits; 1 - u in (0, 1], so the log is finite.
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      t += -std::log1p(-u) / rate_per_s;
    }
    out.push_back({i, t, prompt_len, output_len});
  }
  return out;
}

void assign_shared_prefixes(std::vector<Request>* requests, int64_t prefix_len, int64_t groups,
                            uint64_t seed) {
  PX_CHECK(prefix_len >= 1 && groups >= 1,
           "assign_shared_prefixes: prefix_len=" << prefix_len << " groups=" << groups);
  std::mt19937_64 rng(seed ^ 0x5DEECE66Dull);
  for (Request& r : *requests) {
    r.prefix_hashes = {rng() % static_cast<uint64_t>(groups)};
    r.hash_block = prefix_len;
  }
}

Result<std::vector<Request>> parse_requests(std::string_view text, const std::string& source,
                                            int64_t hash_block, Diagnostics* notes) {
  PX_CHECK(hash_block >= 1, "parse_requests: hash_block=" << hash_block);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark
  const std::vector<Line> lines = non_blank_lines(text);
  if (lines.empty()) return Diagnostic{source, "no requests: the trace is empty", ""};
  if (static_cast<int64_t>(lines.size()) > kMaxRequests + 1)
    return Diagnostic{source, "holds " + std::to_string(lines.size()) + " lines",
                      "at most " + std::to_string(kMaxRequests) + " requests a simulation"};
  Diagnostics errors;
  Ignored ignored;
  std::vector<Request> out;
  if (lines.front().text.front() == '{') {
    for (const Line& line : lines) {
      parse_json_line(line, source, hash_block, &errors, &ignored, &out);
    }
  } else {
    parse_csv(lines, source, &errors, &ignored, &out);
  }
  if (notes)
    for (const auto& [key, where] : ignored)
      notes->push_back({where, "'" + excerpt(key) + "' is not read: ignored",
                        "read: arrival_s, prompt_len, output_len (or their other names), "
                        "hash_ids"});
  if (!errors.empty()) return errors;
  if (out.empty()) return Diagnostic{source, "no requests: a CSV header but no rows", ""};
  std::stable_sort(out.begin(), out.end(),
                   [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

}  // namespace parallax::serving
