#pragma once
// Reading request bodies' optional fields.
#include <nlohmann/json.hpp>

namespace ss::json_fields {

// The body names field k with a value (OpenAI clients send null for "unset").
inline bool given(const nlohmann::json& j, const char* k) { return j.contains(k) && !j[k].is_null(); }

}  // namespace ss::json_fields
