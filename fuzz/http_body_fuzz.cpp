// Completion request bodies as the server parses them, then rendered with
// each chat template.
#include "server/chat_template.h"
#include "server/request_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  ss::CompletionRequest r;
  ss::RequestError err;
  if (ss::parse_completion_body(body, (data[0] & 1) != 0, data[0] >> 4, r, err) && r.chat) {
    for (auto fam : {ss::ChatFamily::Plain, ss::ChatFamily::Llama2, ss::ChatFamily::Llama3, ss::ChatFamily::ChatML,
                     ss::ChatFamily::Mistral, ss::ChatFamily::Zephyr})
      (void)ss::render_chat_turn(fam, r.messages, (data[0] & 2) != 0);
  }
  return 0;
}
