#include "server/json_text.h"

namespace ss {

std::string python_json_text(const nlohmann::json& j) {
  if (j.is_object()) {
    std::string out = "{";
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it != j.begin()) out += ", ";
      out += encode_json(it.key()) + ": " + python_json_text(it.value());
    }
    return out + "}";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + python_json_text(j[i]);
    return out + "]";
  }
  return encode_json(j);
}

}  // namespace ss
