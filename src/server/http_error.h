#pragma once
// An HTTP-level refusal as a value: the status travels typed from the
// scheduler and the request parser to the transport, never as text to parse.
#include <optional>
#include <string>
#include <utility>

namespace ss {

struct HttpError {
  HttpError(int status_, std::string message_, std::string param_ = {}, int retry_after = 0)
      : status(status_), message(std::move(message_)), param(std::move(param_)), retry_after_s(retry_after) {}
  int status = 500;
  std::string message;
  std::string param;      // the offending request field, if one
  int retry_after_s = 0;  // 429/503: when a retry may succeed (0: not said)
};

// nullopt: accepted.
using HttpRefusal = std::optional<HttpError>;

}  // namespace ss
