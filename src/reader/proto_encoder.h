// Protocol buffers' wire format, appended to a std::string by hand: what the
// Perfetto writer needs of it (varints, tags, strings, fixed64 and nested
// messages whose length is patched in once they are written), and nothing of
// the library. Field numbers stay with their callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pinsight_reader {

class ProtoEncoder {
 public:
  explicit ProtoEncoder(std::string &out) : out_(out) {}

  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2 };

  static size_t varint_size(uint64_t value) {
    size_t n = 1;
    while (value >= 0x80) {
      value >>= 7;
      ++n;
    }
    return n;
  }

  void varint(uint64_t value) {
    char bytes[10];
    size_t n = 0;
    while (value >= 0x80) {
      bytes[n++] = static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    bytes[n++] = static_cast<char>(value);
    out_.append(bytes, n);
  }
  void tag(uint32_t field, WireType type) { varint((static_cast<uint64_t>(field) << 3) | type); }

  void uint_field(uint32_t field, uint64_t value) {
    tag(field, kVarint);
    varint(value);
  }
  // int32 and int64 fields: a negative value is ten bytes, as the format wants.
  void int_field(uint32_t field, int64_t value) { uint_field(field, static_cast<uint64_t>(value)); }
  void bool_field(uint32_t field, bool value) { uint_field(field, value ? 1 : 0); }
  void fixed64_field(uint32_t field, uint64_t value) {
    tag(field, kFixed64);
    char bytes[8];
    for (char &b : bytes) {
      b = static_cast<char>(value & 0xff);
      value >>= 8;
    }
    out_.append(bytes, 8);
  }
  void string_field(uint32_t field, std::string_view text) {
    tag(field, kLength);
    varint(text.size());
    out_.append(text.data(), text.size());
  }

  // A nested message: begin() writes its tag and a one-byte length, end()
  // patches the length in, moving the body when it needs more bytes (rare:
  // the writer's messages are short).
  size_t begin(uint32_t field) {
    tag(field, kLength);
    out_.push_back(0);
    return out_.size();
  }
  void end(size_t body) {
    size_t length = out_.size() - body;
    if (length < 0x80) {
      out_[body - 1] = static_cast<char>(length);
      return;
    }
    size_t extra = varint_size(length) - 1;
    out_.insert(body, extra, '\0');
    char *at = &out_[body - 1];
    while (length >= 0x80) {
      *at++ = static_cast<char>((length & 0x7f) | 0x80);
      length >>= 7;
    }
    *at = static_cast<char>(length);
  }

 private:
  std::string &out_;
};

}  // namespace pinsight_reader
