// Minimal JSON text helpers for the streaming writers.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace pinsight_reader {

// Appends `text` as a JSON string literal, quotes included.
void append_json_string(std::string &out, std::string_view text);

template <typename Int>
inline void append_int(std::string &out, Int value) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, result.ptr);
}

// Appends nanoseconds as microseconds with three decimals: exact, and short
// enough for a double once rebased to the start of the trace.
void append_ns_as_us(std::string &out, int64_t ns);

}  // namespace pinsight_reader
