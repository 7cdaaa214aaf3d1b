#pragma once
/// The built-in model zoo: exact architectures of published models, by name, each with the
/// parameter count its authors published so the architecture can be checked against it.

#include <optional>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/result.h"

namespace parallax {

/// Built-in models, in a stable order. Names are lower-case with dashes (e.g. "llama3.1-70b").
const std::vector<ModelSpec>& model_zoo();

/// Looks up a zoo model by name (case-insensitive). An unknown name gives one Diagnostic at
/// `where` (e.g. "--model") whose hint names the nearest match and lists the valid names.
Result<ModelSpec> find_zoo_model(const std::string& name, const std::string& where);

/// The parameter count a zoo entry is checked against, as its source publishes it.
struct PublishedSize {
  double params = 0;         ///< total parameters, as printed by the source
  const char* source = "";   ///< where the number is published
  double active_params = 0;  ///< parameters per token (MoE); equal to params for dense models
};

/// The published size of a zoo model (case-insensitive name); nullopt for unknown names.
std::optional<PublishedSize> published_size(const std::string& name);

}  // namespace parallax
