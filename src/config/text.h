// Lexical pieces of PInsight's configuration format, shared by the parser's
// line reader, section headers and keys (internal to src/config/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace pinsight::config_detail {

bool iequals(std::string_view a, std::string_view b);  // ASCII case-insensitive
bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);
bool is_blank(char c);
std::string_view trim(std::string_view text);
// Splits on every `sep`; items are trimmed, empty ones kept.
std::vector<std::string_view> split(std::string_view text, char sep);
// At most `limit` bytes of `text`, cut between UTF-8 characters, "..." when cut.
std::string shorten(std::string_view text, size_t limit);
// For messages: quoted, control bytes escaped, long text shortened.
std::string quote(std::string_view text);
bool valid_utf8(std::string_view text);

// Values. Each returns false, leaving *out alone, when `text` is not one.
bool parse_int64(std::string_view text, int64_t *out);   // strict decimal integer
bool parse_seconds(std::string_view text, double *out);  // finite decimal number
// A size in bytes > 0: "524288", "64KiB", "64 KB", "1M" (K, M, G are powers of 1024).
bool parse_byte_size(std::string_view text, uint64_t *out);
bool parse_switch(std::string_view text, bool *out);  // on/off/true/false/1/0, any case

// Thread id sets.
void normalize(ThreadSet *set);  // ranges sorted and merged
ThreadSet intersect(const ThreadSet &a, const ThreadSet &b);
bool same_set(const ThreadSet &a, const ThreadSet &b);
// "0-3", "0, 2, 5-7", "*" (with or without the parentheses of a key value).
bool parse_thread_ids(std::string_view text, ThreadSet *out, bool *wildcard);

// Edits (insertions, deletions, substitutions; ASCII case ignored) from a to b.
size_t edit_distance(std::string_view a, std::string_view b);
// "; did you mean 'x'?" for the closest of `known` (within a third of the word's
// length in edits), or nothing.
template <typename Names>
inline std::string did_you_mean(std::string_view word, const Names &known) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (std::string_view name : known) {
    const size_t distance = edit_distance(word, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best.empty() ? std::string() : "; did you mean '" + std::string(best) + "'?";
}

}  // namespace pinsight::config_detail
