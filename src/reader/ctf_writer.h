// A CTF 1.8 trace written directly (metadata and binary streams), for
// `unbatch`: the event classes, clock, event context and environment of an
// input stream class read by babeltrace2, laid out as babeltrace2's
// sink.ctf.fs lays them out (every field byte-aligned, little-endian, names
// prefixed with '_' as CTF 1.8 escapes them), so that it reads back as the
// trace sink.ctf.fs would write. Writing the bytes ourselves costs a few
// nanoseconds per event where building babeltrace2 messages for its sink
// cost a microsecond.
#pragma once

#include <babeltrace2/babeltrace.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pinsight_reader {

class CtfWriter {
 public:
  // The event classes of `stream`'s class but those named in `skip`; writes
  // the metadata into out_dir (created if absent). Throws ReaderError.
  CtfWriter(const bt_stream *stream, const std::string &out_dir, const std::string &skip);
  ~CtfWriter();
  CtfWriter(const CtfWriter &) = delete;
  CtfWriter &operator=(const CtfWriter &) = delete;

  // The output event id of an input event class; -1 if it is not written.
  int64_t event_id(const bt_event_class *ec) const;
  int64_t event_id(const std::string &name) const;
  const bt_field_class *payload_class(int64_t id) const { return events_[id].payload; }
  // The event context's members (the input's common context).
  const bt_field_class *context_class() const { return context_; }

  // A stream of the output, one per call; its file is written packet by packet.
  size_t new_stream();

  // An event: header, then the caller appends its context and payload with
  // the put_* functions, in the order of the classes' members.
  void begin_event(size_t stream, int64_t id, uint64_t clock) {
    Stream &s = streams_[stream];
    if (s.buffer.size() >= kPacketBytes) flush(s);
    if (s.buffer.size() == kPacketHeaderBytes) s.first_clock = clock;
    s.last_clock = clock;
    current_ = &s.buffer;
    put_le(static_cast<uint64_t>(id), 8);
    put_le(clock, 8);
  }
  void put_le(uint64_t value, unsigned bytes) {
    uint8_t raw[8];
    for (unsigned i = 0; i < 8; ++i) raw[i] = static_cast<uint8_t>(value >> (8 * i));
    current_->insert(current_->end(), raw, raw + bytes);
  }
  // A field of the input trace, serialized as its class is declared.
  void put_field(const bt_field *field);

  // Writes every stream's last packet.
  void finish();

 private:
  static constexpr size_t kPacketHeaderBytes = 4 + 16 + 8 + 8 + 5 * 8;
  static constexpr size_t kPacketBytes = size_t{1} << 20;

  struct Stream {
    std::string path;
    uint64_t seq = 0;
    uint64_t first_clock = 0, last_clock = 0;
    std::vector<uint8_t> buffer;
  };
  struct Event {
    std::string name;
    const bt_field_class *payload;
  };

  void flush(Stream &s);
  void write_metadata(const bt_stream *stream, const std::string &dir);

  std::string dir_;
  // Held: the classes below are its; a reader past damage builds its graph anew
  // and lets the first one go (trace_graph.h).
  const bt_stream_class *stream_class_ = nullptr;
  uint8_t uuid_[16];
  const bt_field_class *context_ = nullptr;
  std::vector<Event> events_;
  std::unordered_map<const bt_event_class *, int64_t> ids_;
  std::unordered_map<std::string, int64_t> ids_by_name_;
  std::vector<Stream> streams_;
  std::vector<uint8_t> *current_ = nullptr;
};

// Bytes an integer field of this class takes (its range, rounded up to bytes).
unsigned integer_bytes(const bt_field_class *fc);

}  // namespace pinsight_reader
