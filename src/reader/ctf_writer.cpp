#include "ctf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "trace_graph.h"  // ReaderError

namespace pinsight_reader {
namespace {

constexpr uint32_t kMagic = 0xC1FC1FC1;

std::string quoted(const char *text) {
  std::string out = "\"";
  for (const char *p = text; *p; ++p) {
    if (*p == '"' || *p == '\\') out += '\\';
    if (*p == '\n') {
      out += "\\n";
      continue;
    }
    out += *p;
  }
  return out + "\"";
}

std::string uuid_text(const uint8_t *uuid) {
  char text[37];
  std::snprintf(text, sizeof text,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
                uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9],
                uuid[10], uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]);
  return text;
}

// CTF 1.8 field names: sink.ctf.fs prefixes every one with '_' (the escape of
// a name that is a keyword), which readers remove.
std::string field_name(const char *name) {
  for (const char *p = name; *p; ++p) {
    bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
              (p != name && *p >= '0' && *p <= '9');
    if (!ok) throw ReaderError(std::string("field name '") + name + "' is not a CTF identifier");
  }
  return std::string("_") + name;
}

std::string indent(int depth) { return std::string(static_cast<size_t>(depth), '\t'); }

std::string integer_type(const bt_field_class *fc) {
  std::string out = "integer { size = " + std::to_string(integer_bytes(fc) * 8) + "; align = 8;";
  if (bt_field_class_type_is(bt_field_class_get_type(fc), BT_FIELD_CLASS_TYPE_SIGNED_INTEGER)) {
    out += " signed = true;";
  }
  switch (bt_field_class_integer_get_preferred_display_base(fc)) {
    case BT_FIELD_CLASS_INTEGER_PREFERRED_DISPLAY_BASE_BINARY:
      out += " base = b;";
      break;
    case BT_FIELD_CLASS_INTEGER_PREFERRED_DISPLAY_BASE_OCTAL:
      out += " base = o;";
      break;
    case BT_FIELD_CLASS_INTEGER_PREFERRED_DISPLAY_BASE_HEXADECIMAL:
      out += " base = x;";
      break;
    default:
      break;
  }
  return out + " }";
}

std::string enumeration_type(const bt_field_class *fc, int depth) {
  bool is_signed =
      bt_field_class_type_is(bt_field_class_get_type(fc), BT_FIELD_CLASS_TYPE_SIGNED_INTEGER);
  std::string out = "enum : " + integer_type(fc) + " {\n";
  uint64_t count = bt_field_class_enumeration_get_mapping_count(fc);
  for (uint64_t i = 0; i < count; ++i) {
    const bt_field_class_enumeration_mapping *mapping;
    std::vector<std::pair<std::string, std::string>> ranges;
    if (is_signed) {
      const bt_field_class_enumeration_signed_mapping *m =
          bt_field_class_enumeration_signed_borrow_mapping_by_index_const(fc, i);
      mapping = bt_field_class_enumeration_signed_mapping_as_mapping_const(m);
      const bt_integer_range_set_signed *set =
          bt_field_class_enumeration_signed_mapping_borrow_ranges_const(m);
      for (uint64_t r = 0; r < bt_integer_range_set_get_range_count(
                                   bt_integer_range_set_signed_as_range_set_const(set));
           ++r) {
        const bt_integer_range_signed *range =
            bt_integer_range_set_signed_borrow_range_by_index_const(set, r);
        ranges.emplace_back(std::to_string(bt_integer_range_signed_get_lower(range)),
                            std::to_string(bt_integer_range_signed_get_upper(range)));
      }
    } else {
      const bt_field_class_enumeration_unsigned_mapping *m =
          bt_field_class_enumeration_unsigned_borrow_mapping_by_index_const(fc, i);
      mapping = bt_field_class_enumeration_unsigned_mapping_as_mapping_const(m);
      const bt_integer_range_set_unsigned *set =
          bt_field_class_enumeration_unsigned_mapping_borrow_ranges_const(m);
      for (uint64_t r = 0; r < bt_integer_range_set_get_range_count(
                                   bt_integer_range_set_unsigned_as_range_set_const(set));
           ++r) {
        const bt_integer_range_unsigned *range =
            bt_integer_range_set_unsigned_borrow_range_by_index_const(set, r);
        ranges.emplace_back(std::to_string(bt_integer_range_unsigned_get_lower(range)),
                            std::to_string(bt_integer_range_unsigned_get_upper(range)));
      }
    }
    std::string label = quoted(bt_field_class_enumeration_mapping_get_label(mapping));
    for (const auto &[lower, upper] : ranges) {
      out += indent(depth + 1) + label + " = " + lower;
      if (upper != lower) out += " ... " + upper;
      out += ",\n";
    }
  }
  return out + indent(depth) + "}";
}

std::string declaration(const bt_field_class *fc, const std::string &name, int depth);

std::string structure_type(const bt_field_class *fc, int depth) {
  std::string out = "struct {\n";
  uint64_t count = bt_field_class_structure_get_member_count(fc);
  for (uint64_t i = 0; i < count; ++i) {
    const bt_field_class_structure_member *m =
        bt_field_class_structure_borrow_member_by_index_const(fc, i);
    out += declaration(bt_field_class_structure_member_borrow_field_class_const(m),
                       field_name(bt_field_class_structure_member_get_name(m)), depth + 1);
  }
  return out + indent(depth) + "} align(8)";
}

// "TYPE NAME;" at `depth`, for a member of a structure; a dynamic array is
// preceded by its length, as sink.ctf.fs writes it.
std::string declaration(const bt_field_class *fc, const std::string &name, int depth) {
  bt_field_class_type type = bt_field_class_get_type(fc);
  std::string lead = indent(depth);
  if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_ENUMERATION)) {
    return lead + enumeration_type(fc, depth) + " " + name + ";\n";
  }
  if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_INTEGER)) {
    return lead + integer_type(fc) + " " + name + ";\n";
  }
  if (type == BT_FIELD_CLASS_TYPE_STRING) {
    return lead + "string { encoding = UTF8; } " + name + ";\n";
  }
  if (type == BT_FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL) {
    return lead + "floating_point { mant_dig = 24; exp_dig = 8; align = 8; } " + name + ";\n";
  }
  if (type == BT_FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL) {
    return lead + "floating_point { mant_dig = 53; exp_dig = 11; align = 8; } " + name + ";\n";
  }
  if (type == BT_FIELD_CLASS_TYPE_STRUCTURE) {
    return lead + structure_type(fc, depth) + " " + name + ";\n";
  }
  if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_ARRAY)) {
    const bt_field_class *element = bt_field_class_array_borrow_element_field_class_const(fc);
    if (bt_field_class_type_is(bt_field_class_get_type(element), BT_FIELD_CLASS_TYPE_ARRAY)) {
      throw ReaderError("unsupported field class in the trace's metadata: an array of arrays");
    }
    std::string body = declaration(element, name, depth);
    body.resize(body.size() - 2);  // ";\n"
    if (type == BT_FIELD_CLASS_TYPE_STATIC_ARRAY) {
      return body + "[" + std::to_string(bt_field_class_array_static_get_length(fc)) + "];\n";
    }
    std::string length = "__" + name.substr(1) + "_len";
    return lead + "integer { size = 64; align = 8; } " + length + ";\n" + body + "[" + length +
           "];\n";
  }
  throw ReaderError("unsupported field class type " + std::to_string(type) +
                    " in the trace's metadata (a variant or option)");
}

void write_file(const std::string &path, const char *mode, const void *data, size_t size) {
  FILE *file = std::fopen(path.c_str(), mode);
  bool ok = file != nullptr && std::fwrite(data, 1, size, file) == size;
  if (file != nullptr && std::fclose(file) != 0) ok = false;
  if (!ok) throw ReaderError("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace

unsigned integer_bytes(const bt_field_class *fc) {
  return static_cast<unsigned>((bt_field_class_integer_get_field_value_range(fc) + 7) / 8);
}

CtfWriter::~CtfWriter() { BT_STREAM_CLASS_PUT_REF_AND_RESET(stream_class_); }

CtfWriter::CtfWriter(const bt_stream *stream, const std::string &out_dir, const std::string &skip)
    : dir_(out_dir) {
  std::random_device random;
  for (size_t i = 0; i < sizeof uuid_; i += 4) {
    uint32_t word = random();
    std::memcpy(uuid_ + i, &word, 4);
  }
  uuid_[6] = static_cast<uint8_t>((uuid_[6] & 0x0f) | 0x40);  // version 4
  uuid_[8] = static_cast<uint8_t>((uuid_[8] & 0x3f) | 0x80);

  const bt_stream_class *sc = bt_stream_borrow_class_const(stream);
  context_ = bt_stream_class_borrow_event_common_context_field_class_const(sc);
  uint64_t count = bt_stream_class_get_event_class_count(sc);
  for (uint64_t i = 0; i < count; ++i) {
    const bt_event_class *ec = bt_stream_class_borrow_event_class_by_index_const(sc, i);
    const char *name = bt_event_class_get_name(ec);
    if (name == nullptr || skip == name) continue;
    ids_[ec] = static_cast<int64_t>(events_.size());
    ids_by_name_[name] = static_cast<int64_t>(events_.size());
    events_.push_back({name, bt_event_class_borrow_payload_field_class_const(ec)});
  }
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) throw ReaderError("cannot create " + dir_ + ": " + error.message());
  write_metadata(stream, dir_);
  // Last: nothing throws past this.
  stream_class_ = sc;
  bt_stream_class_get_ref(stream_class_);
}

int64_t CtfWriter::event_id(const bt_event_class *ec) const {
  auto found = ids_.find(ec);
  if (found != ids_.end()) return found->second;
  // Another stream class of the input: matched by name, as the events are.
  const char *name = bt_event_class_get_name(ec);
  return name ? event_id(std::string(name)) : -1;
}

int64_t CtfWriter::event_id(const std::string &name) const {
  auto found = ids_by_name_.find(name);
  return found == ids_by_name_.end() ? -1 : found->second;
}

void CtfWriter::write_metadata(const bt_stream *stream, const std::string &dir) {
  const bt_stream_class *sc = bt_stream_borrow_class_const(stream);
  const bt_clock_class *cc = bt_stream_class_borrow_default_clock_class_const(sc);
  if (cc == nullptr) throw ReaderError("the trace's streams have no clock");
  std::string text =
      "/* CTF 1.8 */\n\n/* This was generated by pinsight-python unbatch. */\n\n"
      "trace {\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"" +
      uuid_text(uuid_) +
      "\";\n\tbyte_order = le;\n\tpacket.header := struct {\n"
      "\t\tinteger { size = 32; align = 8; base = x; } magic;\n"
      "\t\tinteger { size = 8; align = 8; } uuid[16];\n"
      "\t\tinteger { size = 64; align = 8; } stream_id;\n"
      "\t\tinteger { size = 64; align = 8; } stream_instance_id;\n\t} align(8);\n};\n\n";

  const bt_trace *trace = bt_stream_borrow_trace_const(stream);
  text += "env {\n";
  uint64_t entries = bt_trace_get_environment_entry_count(trace);
  for (uint64_t i = 0; i < entries; ++i) {
    const char *name = nullptr;
    const bt_value *value = nullptr;
    bt_trace_borrow_environment_entry_by_index_const(trace, i, &name, &value);
    if (bt_value_is_string(value)) {
      text += "\t" + std::string(name) + " = " + quoted(bt_value_string_get(value)) + ";\n";
    } else if (bt_value_is_signed_integer(value)) {
      text += "\t" + std::string(name) + " = " +
              std::to_string(bt_value_integer_signed_get(value)) + ";\n";
    } else if (bt_value_is_unsigned_integer(value)) {
      text += "\t" + std::string(name) + " = " +
              std::to_string(bt_value_integer_unsigned_get(value)) + ";\n";
    }
  }
  text += "};\n\n";

  const char *clock = bt_clock_class_get_name(cc);
  std::string clock_name = clock ? clock : "default";
  int64_t offset_s = 0;
  uint64_t offset = 0;
  bt_clock_class_get_offset(cc, &offset_s, &offset);
  text += "clock {\n\tname = " + clock_name + ";\n";
  if (const char *description = bt_clock_class_get_description(cc)) {
    text += "\tdescription = " + quoted(description) + ";\n";
  }
  text += "\tfreq = " + std::to_string(bt_clock_class_get_frequency(cc)) +
          ";\n\tprecision = " + std::to_string(bt_clock_class_get_precision(cc)) +
          ";\n\toffset_s = " + std::to_string(offset_s) +
          ";\n\toffset = " + std::to_string(offset) +
          ";\n\tabsolute = " + (bt_clock_class_origin_is_unix_epoch(cc) ? "true" : "false") + ";\n";
  if (bt_uuid uuid = bt_clock_class_get_uuid(cc)) {
    text += "\tuuid = \"" + uuid_text(uuid) + "\";\n";
  }
  text += "};\n\n";

  std::string map = "map = clock." + clock_name + ".value;";
  text +=
      "stream {\n\tid = 0;\n\tpacket.context := struct {\n"
      "\t\tinteger { size = 64; align = 8; } packet_size;\n"
      "\t\tinteger { size = 64; align = 8; } content_size;\n"
      "\t\tinteger { size = 64; align = 8; " +
      map +
      " } timestamp_begin;\n"
      "\t\tinteger { size = 64; align = 8; " +
      map +
      " } timestamp_end;\n"
      "\t\tinteger { size = 64; align = 8; } packet_seq_num;\n\t} align(8);\n\n"
      "\tevent.header := struct {\n"
      "\t\tinteger { size = 64; align = 8; } id;\n"
      "\t\tinteger { size = 64; align = 8; " +
      map + " } timestamp;\n\t} align(8);\n";
  if (context_ != nullptr) text += "\tevent.context := " + structure_type(context_, 1) + ";\n";
  text += "};\n\n";

  for (size_t id = 0; id < events_.size(); ++id) {
    text += "event {\n\tname = " + quoted(events_[id].name.c_str()) +
            ";\n\tstream_id = 0;\n\tid = " + std::to_string(id) + ";\n";
    if (events_[id].payload != nullptr) {
      text += "\tfields := " + structure_type(events_[id].payload, 1) + ";\n";
    }
    text += "};\n\n";
  }

  write_file(dir + "/metadata", "w", text.data(), text.size());
}

size_t CtfWriter::new_stream() {
  // File names as sink.ctf.fs chooses them.
  size_t index = streams_.size();
  Stream &s = streams_.emplace_back();
  s.path = dir_ + (index == 0 ? "/stream" : "/stream-" + std::to_string(index - 1));
  s.buffer.reserve(kPacketBytes + 4096);
  s.buffer.resize(kPacketHeaderBytes);
  if (std::remove(s.path.c_str()) != 0 && errno != ENOENT) {
    throw ReaderError("cannot write " + s.path + ": " + std::strerror(errno));
  }
  return index;
}

void CtfWriter::put_field(const bt_field *field) {
  const bt_field_class *fc = bt_field_borrow_class_const(field);
  bt_field_class_type type = bt_field_class_get_type(fc);
  if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER)) {
    put_le(static_cast<uint64_t>(bt_field_integer_signed_get_value(field)), integer_bytes(fc));
  } else if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_INTEGER)) {
    put_le(bt_field_integer_unsigned_get_value(field), integer_bytes(fc));
  } else if (type == BT_FIELD_CLASS_TYPE_STRING) {
    // Its length's bytes, then the NUL: Babeltrace 2.0.4 leaves an empty string's
    // value at the field's previous one (only its length is right), whose first
    // byte, copied, ran the string into the next field.
    const char *text = bt_field_string_get_value(field);
    current_->insert(current_->end(), text, text + bt_field_string_get_length(field));
    current_->push_back(0);
  } else if (type == BT_FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL) {
    float value = bt_field_real_single_precision_get_value(field);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    put_le(bits, 4);
  } else if (type == BT_FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL) {
    double value = bt_field_real_double_precision_get_value(field);
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    put_le(bits, 8);
  } else if (type == BT_FIELD_CLASS_TYPE_STRUCTURE) {
    uint64_t count = bt_field_class_structure_get_member_count(fc);
    for (uint64_t i = 0; i < count; ++i) {
      put_field(bt_field_structure_borrow_member_field_by_index_const(field, i));
    }
  } else if (bt_field_class_type_is(type, BT_FIELD_CLASS_TYPE_ARRAY)) {
    uint64_t length = bt_field_array_get_length(field);
    if (type != BT_FIELD_CLASS_TYPE_STATIC_ARRAY) put_le(length, 8);
    for (uint64_t i = 0; i < length; ++i) {
      put_field(bt_field_array_borrow_element_field_by_index_const(field, i));
    }
  }
}

void CtfWriter::flush(Stream &s) {
  size_t index = static_cast<size_t>(&s - streams_.data());
  uint8_t *p = s.buffer.data();
  uint64_t bits = static_cast<uint64_t>(s.buffer.size()) * 8;
  auto store = [&p](uint64_t value, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i) *p++ = static_cast<uint8_t>(value >> (8 * i));
  };
  store(kMagic, 4);
  std::memcpy(p, uuid_, 16);
  p += 16;
  store(0, 8);  // stream_id
  store(index, 8);
  store(bits, 8);  // packet_size: no padding after the content
  store(bits, 8);
  store(s.first_clock, 8);
  store(s.last_clock, 8);
  store(s.seq++, 8);
  write_file(s.path, "ab", s.buffer.data(), s.buffer.size());
  s.buffer.resize(kPacketHeaderBytes);
}

void CtfWriter::finish() {
  for (Stream &s : streams_) {
    if (s.buffer.size() > kPacketHeaderBytes) flush(s);
    std::vector<uint8_t>().swap(s.buffer);
  }
}

}  // namespace pinsight_reader
