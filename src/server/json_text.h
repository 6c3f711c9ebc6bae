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

}  // namespace ss
