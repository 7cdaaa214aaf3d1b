#pragma once
/// What the fuzz targets share: the input as text, and the one place where a target turns a
/// loader's result into work that touches every field (serialising it back to JSON).

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/json_io.h"

namespace parallax::fuzz {

inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Parses the input as one JSON document; nullptr when it is not one (a diagnostic, not a crash).
inline std::optional<Json> json_of(const uint8_t* data, size_t size) {
  auto j = parse_json(text_of(data, size), "fuzz");
  if (!j) return std::nullopt;
  return std::move(j).value();
}

}  // namespace parallax::fuzz

namespace parallax::fuzz {

/// The CLI reads its inputs from files: the input written to a file of this process, named with
/// `suffix` (".json" makes cli::resolve_model treat a name as a path).
std::string write_input(const uint8_t* data, size_t size, const std::string& suffix);

}  // namespace parallax::fuzz
