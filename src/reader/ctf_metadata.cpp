#include "ctf_metadata.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string_view>
#include <vector>

namespace pinsight_reader {
namespace {

// A packetized metadata file (CTF 1.8, section 7.1): each packet starts with
// this header, its text follows up to content_size.
constexpr uint32_t kMetadataMagic = 0x75D11D57;
constexpr size_t kMetadataHeaderBytes = 37;  // magic, uuid[16], checksum, sizes, 5 bytes

uint32_t read_u32(const uint8_t *p, bool big_endian) {
  return big_endian ? (uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3])
                    : (uint32_t{p[3]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[1]} << 8 | p[0]);
}

// The text of packetized metadata; *cut: its last packet runs past the end of
// the file (babeltrace2 must not read such a file: it can wait for the rest).
std::string depacketize(const std::string &bytes, bool *cut, std::string *problem) {
  const auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
  bool big_endian = read_u32(data, true) == kMetadataMagic;
  std::string text;
  size_t offset = 0;
  while (offset + kMetadataHeaderBytes <= bytes.size()) {
    const uint8_t *header = data + offset;
    if (read_u32(header, big_endian) != kMetadataMagic) {
      *problem = "bad metadata packet header at byte " + std::to_string(offset);
      return text;
    }
    uint64_t content_bytes = read_u32(header + 24, big_endian) / 8;
    uint64_t packet_bytes = read_u32(header + 28, big_endian) / 8;
    if (content_bytes < kMetadataHeaderBytes || packet_bytes < content_bytes) {
      *problem = "bad metadata packet sizes at byte " + std::to_string(offset);
      return text;
    }
    // A packet cut short keeps the text it has: the statements check says where it ends.
    uint64_t end = std::min<uint64_t>(offset + content_bytes, bytes.size());
    *cut |= offset + packet_bytes > bytes.size();
    text.append(bytes, offset + kMetadataHeaderBytes, end - offset - kMetadataHeaderBytes);
    offset += packet_bytes;
  }
  return text;
}

struct Token {
  enum Kind { Word, Number, String, Punct } kind;
  std::string text;
  size_t end;  // offset in the text just past the token
};

// TSDL tokens; stops at an unterminated comment or string (a text cut there).
std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0, n = text.size();
  while (i < n) {
    char c = text[i];
    if (c == '\0') break;  // padding after the text
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      size_t close = text.find("*/", i + 2);
      if (close == std::string_view::npos) break;
      i = close + 2;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      size_t close = text.find('\n', i);
      if (close == std::string_view::npos) break;
      i = close + 1;
    } else if (c == '"') {
      size_t j = i + 1;
      std::string value;
      while (j < n && text[j] != '"') {
        if (text[j] == '\\' && j + 1 < n) ++j;
        value += text[j++];
      }
      if (j >= n) break;
      tokens.push_back({Token::String, value, j + 1});
      i = j + 1;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < n && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      tokens.push_back({Token::Word, std::string(text.substr(i, j - i)), j});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '-' && i + 1 < n && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      size_t j = i + 1;
      while (j < n && (std::isalnum(static_cast<unsigned char>(text[j])))) ++j;
      tokens.push_back({Token::Number, std::string(text.substr(i, j - i)), j});
      i = j;
    } else if (c == ':' && i + 1 < n && text[i + 1] == '=') {
      tokens.push_back({Token::Punct, ":=", i + 2});
      i += 2;
    } else if (c == '.' && text.substr(i, 3) == "...") {
      tokens.push_back({Token::Punct, "...", i + 3});
      i += 3;
    } else {
      tokens.push_back({Token::Punct, std::string(1, c), i + 1});
      ++i;
    }
  }
  return tokens;
}

// The tokens of the whole top-level statements (each ends with ';' outside any
// braces); `*end` is where the last one ends in the text.
size_t whole_statements(const std::vector<Token> &tokens, size_t *end) {
  int depth = 0;
  size_t count = 0;
  *end = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token &t = tokens[i];
    if (t.kind != Token::Punct) continue;
    if (t.text == "{") ++depth;
    if (t.text == "}") --depth;
    if (t.text == ";" && depth == 0) {
      count = i + 1;
      *end = t.end;
    }
  }
  return count;
}

// Whether `text` holds nothing but blanks, whole comments and padding from `from` on.
bool blank_after(std::string_view text, size_t from) {
  size_t i = from;
  while (i < text.size() && text[i] != '\0') {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t close = text.find("*/", i + 2);
      if (close == std::string_view::npos) return false;
      i = close + 2;
    } else if (text.compare(i, 2, "//") == 0) {
      size_t close = text.find('\n', i);
      if (close == std::string_view::npos) return false;
      i = close + 1;
    } else {
      return false;
    }
  }
  return true;
}

bool parse_number(const std::string &text, int64_t *value) {
  if (text.empty()) return false;
  errno = 0;
  char *end = nullptr;
  bool negative = text[0] == '-';
  uint64_t magnitude = std::strtoull(text.c_str() + (negative ? 1 : 0), &end, 0);
  if (errno != 0 || *end != '\0') return false;
  *value = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

enum class ByteOrder : uint8_t { Default, Little, Big };

struct Type;
using TypePtr = std::shared_ptr<const Type>;

struct Field {
  std::string name;
  TypePtr type;
  uint64_t elements = 1;  // arrays: the product of the dimensions
  bool array = false;
};

struct Type {
  enum Kind { Integer, Struct, Other } kind = Other;
  // Integer
  uint32_t size = 0;
  uint32_t align = 8;
  ByteOrder order = ByteOrder::Default;
  std::string clock;  // `map = clock.NAME.value`
  // Struct
  std::vector<Field> fields;
  uint32_t min_align = 1;  // align(N) after the body
};

// The TSDL subset the packet header and context use (see the header).
class Parser {
 public:
  explicit Parser(const std::vector<Token> &tokens, size_t count, CtfMetadata &out)
      : tokens_(tokens), count_(count), out_(out) {}

  bool run() {
    while (pos_ < count_) {
      if (!statement()) return false;
    }
    return finish();
  }

  std::string problem;

 private:
  const Token *peek(size_t ahead = 0) const {
    return pos_ + ahead < count_ ? &tokens_[pos_ + ahead] : nullptr;
  }
  bool is(const char *text, size_t ahead = 0) const {
    const Token *t = peek(ahead);
    return t != nullptr && t->kind != Token::String && t->text == text;
  }
  bool expect(const char *text) {
    if (!is(text)) return fail(std::string("expected '") + text + "'");
    ++pos_;
    return true;
  }
  TypePtr type_error(const std::string &what) {
    fail(what);
    return nullptr;
  }
  bool fail(const std::string &what) {
    if (problem.empty()) {
      const Token *t = peek();
      problem = what + (t ? " near '" + t->text + "'" : " at the end");
    }
    return false;
  }
  // Skips to the end of the current statement (a ';' outside braces), consuming it.
  void skip_statement() {
    int depth = 0;
    while (pos_ < count_) {
      const Token &t = tokens_[pos_++];
      if (t.kind != Token::Punct) continue;
      if (t.text == "{") ++depth;
      if (t.text == "}") --depth;
      if (t.text == ";" && depth <= 0) return;
    }
  }
  void skip_braces() {
    int depth = 0;
    while (pos_ < count_) {
      const Token &t = tokens_[pos_++];
      if (t.kind != Token::Punct) continue;
      if (t.text == "{") ++depth;
      if (t.text == "}" && --depth == 0) return;
    }
  }

  bool statement() {
    const Token *t = peek();
    if (t->kind == Token::Word && t->text == "typealias") return typealias();
    if (t->kind == Token::Word && is("{", 1) &&
        (t->text == "trace" || t->text == "env" || t->text == "clock" || t->text == "stream")) {
      std::string block = t->text;
      pos_ += 2;
      return this->block(block);
    }
    if (t->kind == Token::Word && t->text == "struct" && peek(1) && peek(1)->kind == Token::Word &&
        is("{", 2)) {
      // struct NAME { ... } [align(N)];
      std::string name = peek(1)->text;
      TypePtr type = parse_type();
      if (!type) return false;
      structs_[name] = type;
      return expect(";");
    }
    skip_statement();  // event, callsite, and what the packets do not need
    return true;
  }

  // typealias TYPE := NAME;  (the name may be several words: unsigned long)
  bool typealias() {
    ++pos_;
    TypePtr type = parse_type();
    if (!type) return false;
    if (!expect(":=")) return false;
    std::string name;
    while (peek() && peek()->kind == Token::Word)
      name += (name.empty() ? "" : " ") + tokens_[pos_++].text;
    aliases_[name] = type;
    return expect(";");
  }

  TypePtr parse_type() {
    const Token *t = peek();
    if (t == nullptr) return type_error("a type expected");
    if (t->kind == Token::Word && t->text == "integer") {
      ++pos_;
      return integer();
    }
    if (t->kind == Token::Word && t->text == "struct") {
      ++pos_;
      std::string name;
      if (peek() && peek()->kind == Token::Word && peek()->text != "align")
        name = tokens_[pos_++].text;
      if (!is("{")) {
        auto found = structs_.find(name);
        if (found == structs_.end()) return type_error("unknown struct " + name);
        return found->second;
      }
      auto type = std::make_shared<Type>();
      type->kind = Type::Struct;
      ++pos_;
      while (!is("}")) {
        if (peek() == nullptr) return type_error("unterminated struct");
        if (!field(*type)) return nullptr;
      }
      ++pos_;
      if (is("align") && is("(", 1)) {
        pos_ += 2;
        int64_t align = 0;
        if (!peek() || !parse_number(peek()->text, &align) || align <= 0) {
          return type_error("bad align");
        }
        type->min_align = static_cast<uint32_t>(align);
        ++pos_;
        if (!expect(")")) return nullptr;
      }
      return type;
    }
    if (t->kind == Token::Word && (t->text == "enum" || t->text == "variant" ||
                                   t->text == "string" || t->text == "floating_point")) {
      // Types the packet fields we read never are: skipped whole.
      ++pos_;
      while (peek() && !is("{") && !is(";") && !is(":=")) ++pos_;
      if (is("{")) skip_braces();
      return std::make_shared<Type>();
    }
    // A type alias: the longest run of words that names one.
    std::string name;
    size_t best = 0;
    TypePtr found;
    for (size_t i = 0; peek(i) && peek(i)->kind == Token::Word; ++i) {
      name += (i ? " " : "") + peek(i)->text;
      auto alias = aliases_.find(name);
      if (alias != aliases_.end()) {
        best = i + 1;
        found = alias->second;
      }
    }
    if (!found) return type_error("unknown type");
    pos_ += best;
    return found;
  }

  TypePtr integer() {
    auto type = std::make_shared<Type>();
    type->kind = Type::Integer;
    bool align_set = false;
    if (!expect("{")) return nullptr;
    while (!is("}")) {
      if (peek() == nullptr || peek(1) == nullptr) return type_error("unterminated integer");
      std::string key = tokens_[pos_++].text;
      if (!expect("=")) return nullptr;
      std::string value;
      while (peek() && !is(";")) value += tokens_[pos_++].text;
      if (!expect(";")) return nullptr;
      int64_t number = 0;
      if (key == "size" && parse_number(value, &number) && number > 0 && number <= 64) {
        type->size = static_cast<uint32_t>(number);
      } else if (key == "align" && parse_number(value, &number) && number > 0) {
        type->align = static_cast<uint32_t>(number);
        align_set = true;
      } else if (key == "byte_order") {
        if (value == "le") type->order = ByteOrder::Little;
        if (value == "be" || value == "network") type->order = ByteOrder::Big;
      } else if (key == "map" && value.rfind("clock.", 0) == 0) {
        // clock.NAME.value
        type->clock = value.substr(6, value.rfind('.') - 6);
      }
    }
    ++pos_;
    if (type->size == 0) return type_error("integer without a size");
    if (!align_set) type->align = type->size % 8 == 0 ? 8 : 1;
    return type;
  }

  // TYPE NAME [N]...;
  bool field(Type &parent) {
    TypePtr type = parse_type();
    if (!type) return false;
    if (!peek() || peek()->kind != Token::Word) return fail("a field name expected");
    Field f{tokens_[pos_++].text, type};
    while (is("[")) {
      ++pos_;
      int64_t n = 0;
      if (!peek() || !parse_number(peek()->text, &n) || n < 0) {
        // A sequence (length from another field): no fixed layout after it.
        f.type = std::make_shared<Type>();
        while (peek() && !is("]")) ++pos_;
      } else {
        f.elements *= static_cast<uint64_t>(n);
        ++pos_;
      }
      f.array = true;
      if (!expect("]")) return false;
    }
    parent.fields.push_back(std::move(f));
    return expect(";");
  }

  // trace, env, clock, stream { ... };
  bool block(const std::string &kind) {
    std::map<std::string, std::string> values;
    std::map<std::string, TypePtr> types;
    while (!is("}")) {
      if (peek() == nullptr) return fail("unterminated " + kind);
      std::string key;
      while (peek() && !is("=") && !is(":=") && !is(";")) key += tokens_[pos_++].text;
      if (is("=")) {
        ++pos_;
        std::string value;
        while (peek() && !is(";")) value += tokens_[pos_++].text;
        values[key] = value;
      } else if (is(":=")) {
        ++pos_;
        TypePtr type = parse_type();
        if (!type) return false;
        types[key] = type;
      }
      if (!expect(";")) return false;
    }
    ++pos_;
    if (!expect(";")) return false;
    if (kind == "trace") {
      trace_values_ = values;
      auto header = types.find("packet.header");
      if (header != types.end()) header_ = header->second;
    } else if (kind == "env") {
      env_ = values;
    } else if (kind == "clock") {
      clocks_[values["name"]] = values;
    } else if (kind == "stream") {
      int64_t id = -1;
      auto value = values.find("id");
      if (value != values.end() && !parse_number(value->second, &id)) return fail("bad stream id");
      auto context = types.find("packet.context");
      streams_[id] = context == types.end() ? nullptr : context->second;
    }
    return true;
  }

  struct Placed {
    std::map<std::string, PacketField> fields;  // top-level integers by name
    std::map<std::string, std::string> clocks;  // their clock, if mapped
    int64_t uuid_offset = -1;
    int64_t end = 0;
    bool complete = true;  // every field's place is known
  };

  static uint32_t alignment(const Type &type) {
    if (type.kind == Type::Integer) return type.align;
    uint32_t align = type.min_align;
    for (const Field &f : type.fields) align = std::max(align, alignment(*f.type));
    return align;
  }
  // Size in bits, or -1 for a type without a fixed one.
  static int64_t size_of(const Type &type) {
    if (type.kind == Type::Integer) return type.size;
    if (type.kind == Type::Other) return -1;
    int64_t offset = 0;
    for (const Field &f : type.fields) {
      int64_t element = size_of(*f.type);
      if (element < 0) return -1;
      uint32_t align = alignment(*f.type);
      offset = (offset + align - 1) / align * align + element * static_cast<int64_t>(f.elements);
    }
    uint32_t align = alignment(type);
    return (offset + align - 1) / align * align;
  }

  // The top-level fields of `type`, placed from `start` (in bits).
  Placed place(const Type &type, int64_t start, bool big_endian) const {
    Placed out;
    uint32_t struct_align = alignment(type);
    int64_t offset = (start + struct_align - 1) / struct_align * struct_align;
    for (const Field &f : type.fields) {
      uint32_t align = alignment(*f.type);
      offset = (offset + align - 1) / align * align;
      int64_t element = size_of(*f.type);
      if (element < 0) {
        out.complete = false;  // nothing after it has a known place
        break;
      }
      if (f.type->kind == Type::Integer && !f.array && f.type->size % 8 == 0 && offset % 8 == 0) {
        PacketField field;
        field.offset_bits = offset;
        field.bits = f.type->size;
        field.big_endian =
            f.type->order == ByteOrder::Default ? big_endian : f.type->order == ByteOrder::Big;
        out.fields[f.name] = field;
        if (!f.type->clock.empty()) out.clocks[f.name] = f.type->clock;
      }
      if (f.name == "uuid" && f.array && f.elements == 16 && element == 8 && offset % 8 == 0) {
        out.uuid_offset = offset;
      }
      offset += element * static_cast<int64_t>(f.elements);
    }
    out.end = offset;
    return out;
  }

  ClockInfo clock(const std::string &name) const {
    ClockInfo info;
    auto found = clocks_.find(name);
    if (found == clocks_.end()) return info;
    const auto &values = found->second;
    int64_t number = 0;
    auto get = [&](const char *key) {
      auto v = values.find(key);
      return v != values.end() && parse_number(v->second, &number);
    };
    if (get("freq") && number > 0) info.frequency = static_cast<uint64_t>(number);
    if (get("offset_s")) info.offset_s = number;
    if (get("offset")) info.offset_cycles = number;
    return info;
  }

  bool finish() {
    auto order = trace_values_.find("byte_order");
    bool big_endian =
        order != trace_values_.end() && (order->second == "be" || order->second == "network");
    out_.big_endian = big_endian;
    auto uuid = trace_values_.find("uuid");
    if (uuid != trace_values_.end()) {
      std::string hex;
      for (char c : uuid->second) {
        if (std::isxdigit(static_cast<unsigned char>(c))) hex += c;
      }
      if (hex.size() == 32) {
        for (size_t i = 0; i < 16; ++i) {
          out_.uuid[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
        }
        out_.has_uuid = true;
      }
    }
    auto hostname = env_.find("hostname");
    if (hostname != env_.end()) out_.hostname = hostname->second;
    // LTTng before 2.11 could stamp a packet's last event after its end.
    auto tracer = env_.find("tracer_name");
    int64_t major = 0, minor = 0;
    auto major_value = env_.find("tracer_major");
    auto minor_value = env_.find("tracer_minor");
    if (tracer != env_.end() &&
        (tracer->second == "lttng-ust" || tracer->second == "lttng-modules") &&
        major_value != env_.end() && parse_number(major_value->second, &major) &&
        minor_value != env_.end() && parse_number(minor_value->second, &minor)) {
      out_.events_within_packets = major > 2 || (major == 2 && minor >= 11);
    }
    int64_t vpid = -1;
    auto env_vpid = env_.find("vpid");
    if (env_vpid != env_.end() && parse_number(env_vpid->second, &vpid)) out_.vpid = vpid;

    if (!header_) return fail("the trace declares no packet header");
    Placed header = place(*header_, 0, big_endian);
    if (!header.complete) return fail("the packet header has fields of no fixed size");
    auto take = [](Placed &p, const char *name) {
      auto found = p.fields.find(name);
      return found == p.fields.end() ? PacketField{} : found->second;
    };
    out_.magic = take(header, "magic");
    out_.stream_id = take(header, "stream_id");
    out_.stream_instance_id = take(header, "stream_instance_id");
    out_.uuid_offset_bits = header.uuid_offset;
    out_.header_bits = header.end;
    if (streams_.empty()) return fail("the trace declares no stream");
    for (const auto &[id, context_type] : streams_) {
      PacketContextLayout layout;
      layout.end_bits = header.end;
      if (context_type) {
        Placed context = place(*context_type, header.end, big_endian);
        if (!context.complete) return fail("a packet context has fields of no fixed size");
        layout.timestamp_begin = take(context, "timestamp_begin");
        layout.timestamp_end = take(context, "timestamp_end");
        layout.content_size = take(context, "content_size");
        layout.packet_size = take(context, "packet_size");
        layout.packet_seq_num = take(context, "packet_seq_num");
        layout.events_discarded = take(context, "events_discarded");
        layout.end_bits = context.end;
        auto mapped = context.clocks.find("timestamp_begin");
        if (mapped != context.clocks.end()) layout.clock = clock(mapped->second);
      }
      uint64_t key = id < 0 ? kNoStreamClassId : static_cast<uint64_t>(id);
      out_.stream_classes[key] = layout;
    }
    return true;
  }

  const std::vector<Token> &tokens_;
  size_t count_;
  CtfMetadata &out_;
  size_t pos_ = 0;
  std::map<std::string, TypePtr> aliases_, structs_;
  std::map<std::string, std::string> trace_values_, env_;
  std::map<std::string, std::map<std::string, std::string>> clocks_;
  std::map<int64_t, TypePtr> streams_;
  TypePtr header_;
};

}  // namespace

uint64_t PacketField::read(const uint8_t *bytes) const {
  const uint8_t *p = bytes + offset_bits / 8;
  size_t n = bits / 8;
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) {
    value = big_endian ? (value << 8) | p[i] : value | (uint64_t{p[i]} << (8 * i));
  }
  return value;
}

uint64_t ClockInfo::ns(uint64_t cycles) const {
  auto to_ns = [this](int64_t value) -> int64_t {
    if (frequency == 1000000000) return value;
    return static_cast<int64_t>(1e9 * static_cast<double>(value) / static_cast<double>(frequency));
  };
  int64_t ns = offset_s * 1000000000 + to_ns(offset_cycles) + to_ns(static_cast<int64_t>(cycles));
  return ns < 0 ? 0 : static_cast<uint64_t>(ns);
}

CtfMetadata read_ctf_metadata(const std::string &dir) {
  CtfMetadata out;
  std::ifstream file(dir + "/metadata", std::ios::binary);
  if (!file) {
    out.problem = "no metadata file";
    return out;
  }
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!bytes.empty() && bytes[0] == '\x1e') {
    // CTF 2 (a JSON text sequence, LTTng 2.15 on): babeltrace2 2.1 reads it; the
    // pre-scan does not, and leaves such a trace to babeltrace2's own checks.
    out.found = true;
    out.problem = "CTF 2 metadata (the pre-scan reads CTF 1.8's)";
    return out;
  }
  std::string text;
  bool packet_cut = false;
  if (bytes.size() >= 4 &&
      (read_u32(reinterpret_cast<const uint8_t *>(bytes.data()), false) == kMetadataMagic ||
       read_u32(reinterpret_cast<const uint8_t *>(bytes.data()), true) == kMetadataMagic)) {
    text = depacketize(bytes, &packet_cut, &out.problem);
  } else {
    text = bytes;
  }
  if (text.compare(0, 6, "/* CTF") != 0) {
    if (out.problem.empty()) out.problem = bytes.empty() ? "empty metadata file" : "no CTF text";
    return out;
  }
  std::vector<Token> tokens = tokenize(text);
  size_t end = 0;
  size_t count = whole_statements(tokens, &end);
  out.found = true;
  // Text past the last whole statement (comments and padding aside) was cut.
  if (packet_cut || !blank_after(text, end)) {
    out.cut = true;
    size_t used = text.find('\0', end);
    out.lost_bytes = (used == std::string::npos ? text.size() : used) - end;
    text.resize(end);
    text += "\n";
  }
  out.text = std::move(text);
  Parser parser(tokens, count, out);
  out.layout_known = parser.run();
  if (!out.layout_known && out.problem.empty()) out.problem = parser.problem;
  return out;
}

}  // namespace pinsight_reader
