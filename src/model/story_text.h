#pragma once
// The evaluation text convention of STREAMING.md: TinyStories text split at
// lines holding only <|endoftext|>, each story trimmed, empty ones dropped,
// the last (unfinished) piece dropped, joined with "\n".
#include <string>
#include <string_view>

namespace ss {
std::string join_stories(std::string_view raw);
}
