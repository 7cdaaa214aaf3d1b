#include "core/json_read.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/names.h"
#include "core/text.h"

namespace parallax {
namespace {

/// "where:line:col" of byte `offset` of `text`.
std::string located(std::string_view text, size_t offset, const std::string& where,
                    int first_line) {
  size_t line = static_cast<size_t>(std::max(1, first_line)), col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return where + ":" + std::to_string(line) + ":" + std::to_string(col);
}

/// The byte offset where nesting first exceeds `max_depth`, if it does. Brackets inside strings
/// do not count. Checked before parsing so that the parser never builds a value too deep to walk.
std::optional<size_t> too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return i;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return std::nullopt;
}

/// The byte offset of the last object key spelled `key` (unescaped) in `text`: where a key
/// given twice is reported, since the SAX interface gives no positions.
size_t last_key_at(std::string_view text, std::string_view key) {
  size_t found = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '"') continue;
    size_t end = i + 1;
    while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
    if (end >= text.size()) break;
    size_t next = end + 1;
    while (next < text.size() &&
           (text[next] == ' ' || text[next] == '\t' || text[next] == '\n' || text[next] == '\r'))
      ++next;
    if (next < text.size() && text[next] == ':' && text.substr(i + 1, end - i - 1) == key)
      found = i;
    i = end;
  }
  return found;
}

/// A SAX handler that builds the value as nlohmann's DOM parser does, but refuses a key given
/// twice in one object (the DOM parser keeps the last silently) and records where a parse error
/// or a number overflow happened instead of throwing.
class DomBuilder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return put(Json(nullptr)); }
  bool boolean(bool v) override { return put(Json(v)); }
  bool number_integer(number_integer_t v) override { return put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(Json(v)); }
  bool string(string_t& v) override { return put(Json(std::move(v))); }
  bool binary(binary_t& v) override { return put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (stack_.back()->contains(k)) {
      duplicate_ = pointer() + "/" + text_excerpt(k, 60);
      duplicate_key_ = k;
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error_offset_ = position;
    error_ = ex.what();
    return false;
  }

  Json root;
  std::string duplicate_;  ///< JSON pointer of a key given twice
  std::string duplicate_key_;
  std::string error_;
  size_t error_offset_ = 0;

 private:
  Json* put(Json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    Json& slot = top[key_];
    slot = std::move(v);
    keys_.back() = key_;
    return &slot;
  }
  bool open(Json container) {
    if (!stack_.empty() && stack_.back()->is_array())
      keys_.back() = std::to_string(stack_.back()->size());
    stack_.push_back(put(std::move(container)));
    keys_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  /// The JSON pointer of the object on top of the stack.
  std::string pointer() const {
    std::string p;
    for (size_t i = 0; i + 1 < keys_.size(); ++i) p += "/" + text_excerpt(keys_[i], 60);
    return p;
  }

  std::vector<Json*> stack_;
  std::vector<std::string> keys_;  ///< per open container: the key or index of its open child
  std::string key_;
};

}  // namespace

Result<Json> parse_json(std::string_view text, const std::string& where, int first_line) {
  if (auto at = too_deep_at(text, kMaxJsonDepth))
    return Diagnostic{located(text, *at, where, first_line),
                      "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                      "no Parallax input nests more than a few levels"};
  DomBuilder b;
  if (Json::sax_parse(text, &b)) return std::move(b.root);
  if (!b.duplicate_.empty())
    return Diagnostic{located(text, last_key_at(text, b.duplicate_key_), where, first_line),
                      "key " + b.duplicate_ + " given twice in one object",
                      "keep one; which one a reader takes differs between tools"};
  // nlohmann reports the position one past the offending character.
  const size_t at = b.error_offset_ > 0 ? b.error_offset_ - 1 : 0;
  std::string what = b.error_;
  if (auto pos = what.find("syntax error"); pos != std::string::npos)
    what = "malformed JSON: " + what.substr(pos);
  else if (auto ovf = what.find("number overflow"); ovf != std::string::npos)
    what = what.substr(ovf) + ": out of the range of a double";
  return Diagnostic{located(text, at, where, first_line), text_excerpt(what, 200), ""};
}

std::string text_excerpt(std::string_view s, size_t max_chars, bool keep_layout) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (keep_layout && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size()) out += "... (" + format_bytes(static_cast<double>(s.size())) + " in all)";
  return out;
}

std::string json_excerpt(const Json& v, size_t max_chars) {
  if (v.is_structured() && v.size() > max_chars / 2)
    return std::string(v.is_object() ? "an object of " : "an array of ") +
           std::to_string(v.size()) + (v.is_object() ? " keys" : " items");
  if (v.is_string()) return "\"" + text_excerpt(v.get_ref<const std::string&>(), max_chars) + "\"";
  return text_excerpt(v.dump(), max_chars);
}

std::string text_at(const Json& o, const char* key, const std::string& fallback) {
  if (!o.is_object()) return fallback;
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<std::string> bad_name(std::string_view s) {
  if (s.empty()) return "empty";
  if (s.size() > 200) return "longer than 200 bytes";
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "holds a control character";
  return std::nullopt;
}

JsonFields::JsonFields(const Json& obj, std::string where, Diagnostics* out)
    : obj_(obj), where_(std::move(where)), out_(out) {
  if (!obj_.is_object())
    out_->push_back({where_, std::string("expected an object, got ") + obj_.type_name(), ""});
}

void JsonFields::reject_unknown(const std::vector<std::string>& known) {
  if (!obj_.is_object()) return;
  for (const auto& [key, v] : obj_.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    out_->push_back({where_ + "/" + text_excerpt(key, 60),
                     "unknown key '" + text_excerpt(key, 60) + "'", unknown_name_hint(key, known)});
  }
}

bool JsonFields::has(const char* key) const {
  return obj_.is_object() && obj_.contains(key) && !obj_.at(key).is_null();
}

const Json* JsonFields::object(const char* key) const { return has(key) ? &obj_.at(key) : nullptr; }

const Json* JsonFields::array(const char* key) {
  const Json* v = object(key);
  if (!v || v->is_array()) return v;
  out_->push_back({path(key), "expected an array, got " + json_excerpt(*v), ""});
  return nullptr;
}

const Json* JsonFields::value(const char* key, bool required) {
  if (!obj_.is_object()) return nullptr;
  if (!has(key)) {
    if (required) out_->push_back({path(key), "missing", ""});
    return nullptr;
  }
  const Json* v = &obj_.at(key);
  if (v->is_object() && v->contains("value")) {  // {"value": x, "source": "..."}
    if (v->contains("source") && v->at("source").is_string())
      sources_[key] = v->at("source").get<std::string>();
    v = &v->at("value");
  }
  return v;
}

int64_t JsonFields::integer(const char* key, std::optional<int64_t> fallback) {
  const Json* v = value(key, !fallback.has_value());
  if (!v) return fallback.value_or(0);
  if (!v->is_number() ||
      (v->is_number_float() && std::trunc(v->get<double>()) != v->get<double>())) {
    out_->push_back({path(key), "expected an integer, got " + json_excerpt(*v), ""});
    return fallback.value_or(0);
  }
  // Every integer field (layers, widths, degrees, batch, sequence) fits in 32 bits; larger
  // values would wrap where they are stored as int.
  const double x = v->get<double>();
  if (x < -2147483648.0 || x > 2147483647.0) {
    out_->push_back(
        {path(key), "integer out of range, got " + json_excerpt(*v), "at most 2147483647"});
    return fallback.value_or(0);
  }
  return static_cast<int64_t>(x);
}

int64_t JsonFields::integer_in(const char* key, int64_t lo, int64_t hi, const char* why,
                               std::optional<int64_t> fallback) {
  const size_t before = out_->size();
  const int64_t x = integer(key, fallback);
  if (out_->size() == before && has(key) && (x < lo || x > hi)) {
    out_->push_back(
        {path(key),
         "got " + std::to_string(x) + ", want " + std::to_string(lo) + ".." + std::to_string(hi),
         why});
    return fallback.value_or(lo);
  }
  return x;
}

double JsonFields::number(const char* key, std::optional<double> fallback) {
  const Json* v = value(key, !fallback.has_value());
  if (!v) return fallback.value_or(0);
  if (v->is_number()) return v->get<double>();
  out_->push_back({path(key), "expected a number, got " + json_excerpt(*v), ""});
  return fallback.value_or(0);
}

double JsonFields::number_in(const char* key, double lo, double hi, const char* why,
                             std::optional<double> fallback) {
  const size_t before = out_->size();
  const double x = number(key, fallback);
  if (out_->size() == before && has(key) && !(x >= lo && x <= hi)) {
    out_->push_back({path(key),
                     "got " + format_number("%g", x) + ", want " + format_number("%g", lo) + ".." +
                         format_number("%g", hi),
                     why});
    return fallback.value_or(lo);
  }
  return x;
}

bool JsonFields::boolean(const char* key, std::optional<bool> fallback) {
  const Json* v = value(key, !fallback.has_value());
  if (!v) return fallback.value_or(false);
  if (v->is_boolean()) return v->get<bool>();
  out_->push_back({path(key), "expected true or false, got " + json_excerpt(*v), ""});
  return fallback.value_or(false);
}

std::string JsonFields::string(const char* key, std::optional<std::string> fallback) {
  const Json* v = value(key, !fallback.has_value());
  if (!v) return fallback.value_or("");
  if (v->is_string()) return v->get<std::string>();
  out_->push_back({path(key), "expected a string, got " + json_excerpt(*v), ""});
  return fallback.value_or("");
}

std::string JsonFields::name(const char* key, std::optional<std::string> fallback) {
  const size_t before = out_->size();
  std::string s = string(key, fallback);
  if (out_->size() != before || !has(key)) return s;
  if (auto why = bad_name(s)) {
    out_->push_back({path(key), "name " + *why + ": \"" + text_excerpt(s, 60) + "\"",
                     "a name is printable text of at most 200 bytes"});
    return fallback.value_or("");
  }
  return s;
}

}  // namespace parallax
