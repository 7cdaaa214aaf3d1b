#pragma once
/// The hardware profiles shipped in hw_profiles/ and the software-stack profiles in stacks/,
/// compiled into the library.

#include <string>
#include <utility>
#include <vector>

namespace parallax {

/// (file stem, JSON text) for each hw_profiles/*.json, sorted by name.
const std::vector<std::pair<std::string, std::string>>& builtin_profile_texts();
/// (file stem, JSON text) for each stacks/*.json, sorted by name.
const std::vector<std::pair<std::string, std::string>>& builtin_stack_texts();

}  // namespace parallax
