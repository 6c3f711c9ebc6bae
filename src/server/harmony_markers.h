#pragma once
// The special tokens of gpt-oss's Harmony format as they stand in an answer's
// text (llama.cpp renders them as text): one spelling for the splitter that
// streams an answer's channels and the reader of its tool calls.
#include <string_view>

namespace ss::harmony {

inline constexpr std::string_view kStart = "<|start|>";
inline constexpr std::string_view kChannel = "<|channel|>";
inline constexpr std::string_view kMessage = "<|message|>";
inline constexpr std::string_view kEnd = "<|end|>";
inline constexpr std::string_view kReturn = "<|return|>";
inline constexpr std::string_view kCall = "<|call|>";

}  // namespace ss::harmony
