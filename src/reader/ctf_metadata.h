// What a CTF 1.8 trace's metadata says about its packets, read without
// babeltrace2: the text (packetized, as LTTng writes it, or plain), whether it
// was cut in the middle of a statement, and the layout of the packet header
// and of each stream class's packet context, which the pre-scan
// (stream_scan.h) needs to walk the stream files.
//
// Only the part of TSDL these two structures use is understood: integers,
// arrays of integers, structures, type aliases. A layout it cannot follow
// leaves `layout_known` false; babeltrace2 then reads the trace unscanned.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace pinsight_reader {

// An unsigned integer field of a packet's header or context, byte-aligned.
struct PacketField {
  int64_t offset_bits = -1;  // from the packet's first bit; -1: absent
  uint32_t bits = 0;
  bool big_endian = false;

  bool present() const { return offset_bits >= 0; }
  // The field's value in `bytes` (which hold at least end_bits() bits).
  uint64_t read(const uint8_t *bytes) const;
  int64_t end_bits() const { return offset_bits + bits; }
};

// The clock a stream class's packet timestamps count.
struct ClockInfo {
  uint64_t frequency = 1000000000;
  int64_t offset_s = 0;
  int64_t offset_cycles = 0;
  // Nanoseconds since the Unix epoch at `cycles`, as babeltrace2 computes them.
  uint64_t ns(uint64_t cycles) const;
};

struct PacketContextLayout {
  PacketField timestamp_begin, timestamp_end, content_size, packet_size, packet_seq_num,
      events_discarded;
  int64_t end_bits = 0;  // where the context ends: the events begin there
  ClockInfo clock;
};

inline constexpr uint64_t kNoStreamClassId = UINT64_MAX;

struct CtfMetadata {
  bool found = false;       // a metadata file with CTF text
  bool cut = false;         // it ends inside a statement: `text` keeps the whole ones
  std::string text;         // the TSDL text, whole statements only
  uint64_t lost_bytes = 0;  // bytes of text after the last whole statement
  std::string problem;      // why the text or the layout could not be read ("" when known)

  bool layout_known = false;
  bool big_endian = false;
  bool has_uuid = false;
  std::array<uint8_t, 16> uuid{};
  PacketField magic, stream_id, stream_instance_id;
  int64_t uuid_offset_bits = -1;  // the header's uuid: 16 bytes
  int64_t header_bits = 0;
  // By stream class id (kNoStreamClassId: the only one, when the header has no stream_id).
  std::map<uint64_t, PacketContextLayout> stream_classes;
  // LTTng 2.11 on: every event's time lies within its packet's (an event outside
  // was decoded from garbled bytes).
  bool events_within_packets = false;
  std::string hostname;  // the environment's hostname ("" when absent)
  int64_t vpid = -1;     // per-process buffers: the process (-1: absent)
};

// Reads `dir`/metadata; never throws (a problem is in `problem`).
CtfMetadata read_ctf_metadata(const std::string &dir);

}  // namespace pinsight_reader
