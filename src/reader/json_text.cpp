#include "json_text.h"

namespace pinsight_reader {

void append_json_string(std::string &out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 15]);
        } else {
          // UTF-8 passes through; strings come from Python's own str objects.
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_ns_as_us(std::string &out, int64_t ns) {
  if (ns < 0) {
    out.push_back('-');
    ns = -ns;
  }
  append_int(out, ns / 1000);
  int64_t frac = ns % 1000;
  if (frac != 0) {
    char digits[4] = {'.', static_cast<char>('0' + frac / 100),
                      static_cast<char>('0' + frac / 10 % 10), static_cast<char>('0' + frac % 10)};
    out.append(digits, 4);
  }
}

}  // namespace pinsight_reader
