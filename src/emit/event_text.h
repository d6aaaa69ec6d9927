// Text an event carries, bounded so that the event fits LTTng's smallest
// sub-buffer, a 4 KiB page, which a memory budget can bring the channel down
// to: an event larger than its sub-buffer is discarded whatever the channel's
// size, and with a code_info every event of that function loses its name.
// Cut on UTF-8 character starts and marked with the whole length in bytes.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

namespace pinsight::emitter::event_text {

// A name (qualname, file, callable, module, section): three of them and an
// event's other fields fit a page (lexgion_counts has the most).
constexpr size_t kNameBytes = 1024;

inline bool continues_character(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) == 0x80;
}

// The first `limit` bytes at most, then " [... N bytes]": a command line,
// whose start says what ran.
inline std::string cut_tail(const std::string &text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t cut = limit;
  while (cut > 0 && continues_character(text[cut])) --cut;
  return text.substr(0, cut) + " [... " + std::to_string(text.size()) + " bytes]";
}

// At most `limit` bytes, its middle replaced by "[... N bytes ...]": a name
// keeps both ends (a path's root and its file, a qualname's outer scopes and
// its function).
inline std::string cut_middle(const std::string &text, size_t limit = kNameBytes) {
  if (text.size() <= limit) return text;
  const std::string mark = "[... " + std::to_string(text.size()) + " bytes ...]";
  const size_t kept = limit > mark.size() ? limit - mark.size() : 0;
  size_t head = kept / 2;
  while (head > 0 && continues_character(text[head])) --head;
  size_t tail = text.size() - (kept - head);
  while (tail < text.size() && continues_character(text[tail])) ++tail;
  return text.substr(0, head) + mark + text.substr(tail);
}

// `text` itself when it fits, else its cut_middle kept in `storage`.
inline const char *bounded(const char *text, std::string &storage, size_t limit = kNameBytes) {
  if (std::strlen(text) <= limit) return text;
  storage = cut_middle(text, limit);
  return storage.c_str();
}

}  // namespace pinsight::emitter::event_text
