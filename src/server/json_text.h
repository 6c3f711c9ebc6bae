#pragma once
// JSON text of a response. Model output is not always valid UTF-8 (a
// byte-level vocabulary can emit any bytes), and nlohmann::json::dump throws
// on invalid UTF-8 by default: every body the server writes goes through
// here, which replaces each invalid byte with U+FFFD (as other
// OpenAI-compatible servers do) and cannot throw for that reason.
#include <nlohmann/json.hpp>
#include <string>

namespace ss {

inline std::string encode_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// JSON text as Python's json.dumps writes it by default (", " and ": "
// between items): what chat templates' `tojson` gives, so a prompt holds
// the bytes the model's own template would write.
std::string python_json_text(const nlohmann::json& j);

}  // namespace ss
