// Lexical pieces of the configuration format: strings, numbers, switches and
// thread id sets, as PInsight writes them. No diagnostics here: callers word them.
#include "config/text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace pinsight::config_detail {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    items.push_back(trim(text.substr(start, at == std::string_view::npos ? at : at - start)));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return items;
}

std::string shorten(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string quote(std::string_view text) {
  std::string out = "'";
  for (char c : shorten(text, 60)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "'";
}

bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t code;
    if ((byte & 0xe0) == 0xc0) {
      extra = 1, code = byte & 0x1f;
    } else if ((byte & 0xf0) == 0xe0) {
      extra = 2, code = byte & 0x0f;
    } else if ((byte & 0xf8) == 0xf0) {
      extra = 3, code = byte & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Strict decimal integer: optional sign, digits, nothing else.
bool parse_int64(std::string_view text, int64_t *out) {
  text = trim(text);
  if (text.empty() || text.size() > 30) return false;
  const std::string buffer(text);
  const char *digits = buffer.c_str();
  if (*digits == '+' || *digits == '-') ++digits;
  if (!(*digits >= '0' && *digits <= '9')) return false;
  errno = 0;
  char *end = nullptr;
  const long long value = std::strtoll(buffer.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = value;
  return true;
}

// A size in bytes > 0: "524288", "64KiB", "64 KB", "1M" (K, M, G are powers of 1024).
bool parse_byte_size(std::string_view text, uint64_t *out) {
  text = trim(text);
  size_t digits = 0;
  while (digits < text.size() && digits < 16 && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0 || (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')) {
    return false;
  }
  uint64_t value = std::strtoull(std::string(text.substr(0, digits)).c_str(), nullptr, 10);
  std::string unit(trim(text.substr(digits)));
  for (char &c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb" || unit == "kib") scale = uint64_t{1} << 10;
  if (unit == "m" || unit == "mb" || unit == "mib") scale = uint64_t{1} << 20;
  if (unit == "g" || unit == "gb" || unit == "gib") scale = uint64_t{1} << 30;
  if (scale == 0 || value == 0 || value > (uint64_t{1} << 40) / scale) return false;
  *out = value * scale;
  return true;
}

bool parse_seconds(std::string_view text, double *out) {
  text = trim(text);
  if (text.empty() || text.size() > 40) return false;
  const std::string buffer(text);
  const char first = buffer[0];
  if (!((first >= '0' && first <= '9') || first == '-' || first == '+' || first == '.')) {
    return false;  // no "inf", "nan", hex floats
  }
  errno = 0;
  char *end = nullptr;
  const double value = std::strtod(buffer.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

// on/off/true/false/1/0, any case.
bool parse_switch(std::string_view text, bool *out) {
  text = trim(text);
  if (iequals(text, "on") || iequals(text, "true") || text == "1") {
    *out = true;
    return true;
  }
  if (iequals(text, "off") || iequals(text, "false") || text == "0") {
    *out = false;
    return true;
  }
  return false;
}

void normalize(ThreadSet *set) {
  if (set->everything) {
    set->ranges.clear();
    return;
  }
  auto &ranges = set->ranges;
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int, int>> merged;
  for (const auto &range : ranges) {
    if (!merged.empty() && static_cast<int64_t>(range.first) <= int64_t{merged.back().second} + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  ranges = std::move(merged);
}

ThreadSet intersect(const ThreadSet &a, const ThreadSet &b) {
  if (a.everything) return b;
  if (b.everything) return a;
  ThreadSet out;
  out.everything = false;
  for (const auto &x : a.ranges) {
    for (const auto &y : b.ranges) {
      const int low = std::max(x.first, y.first), high = std::min(x.second, y.second);
      if (low <= high) out.ranges.emplace_back(low, high);
    }
  }
  normalize(&out);
  return out;
}

bool same_set(const ThreadSet &a, const ThreadSet &b) {
  return a.everything == b.everything && (a.everything || a.ranges == b.ranges);
}

bool parse_thread_ids(std::string_view text, ThreadSet *out, bool *wildcard) {
  text = trim(text);
  if (text.size() >= 2 && text.front() == '(' && text.back() == ')') {
    text = trim(text.substr(1, text.size() - 2));
  }
  *wildcard = false;
  ThreadSet set;
  if (text == "*") {
    *wildcard = true;
    *out = set;
    return true;
  }
  set.everything = false;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) return false;
    const size_t dash = item.find('-');
    int64_t low, high;
    if (dash == std::string_view::npos) {
      if (!parse_int64(item, &low)) return false;
      high = low;
    } else if (!parse_int64(item.substr(0, dash), &low) ||
               !parse_int64(item.substr(dash + 1), &high)) {
      return false;
    }
    if (trim(item)[0] == '+' || low < 0 || high < low || high > INT_MAX) return false;
    set.ranges.emplace_back(static_cast<int>(low), static_cast<int>(high));
  }
  normalize(&set);
  *out = set;
  return true;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = diagonal + (std::tolower(static_cast<unsigned char>(a[i - 1])) !=
                                              std::tolower(static_cast<unsigned char>(b[j - 1])));
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

}  // namespace pinsight::config_detail
