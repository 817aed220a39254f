#include "serverd/api/structured_outputs.h"

#include <utility>

#include "serverd/api/api_error.h"
#include "serverd/api/generator.h"
#include "serverd/api/reasoning_gated_constraint.h"

namespace serverd::api {

ConstraintFactory compile_constraint(const std::optional<StructuredOutputRequest>& request, const ModelInfo& model) {
  if (!request) return {};
  if (model.constraints == nullptr) {
    throw_bad_request("'" + request->field +
                          "' asks for structured outputs, which this server build cannot compile "
                          "for the model (no grammar engine)",
                      request->field);
  }
  try {
    return model.constraints->compile(request->spec);
  } catch (const engine::grammar::GrammarError& e) {
    throw_bad_request("Invalid '" + request->field + "': " + e.what(), request->field);
  }
}

ConstraintFactory after_reasoning(ConstraintFactory inner, std::vector<std::int32_t> reasoning_end) {
  if (!inner) return inner;
  return [inner = std::move(inner), reasoning_end = std::move(reasoning_end)]() {
    return std::unique_ptr<engine::sampling::TokenConstraint>(
        std::make_unique<ReasoningGatedConstraint>(inner(), reasoning_end));
  };
}

}  // namespace serverd::api
