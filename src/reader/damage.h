// What a damaged trace lost: one record per place where the reader had to skip
// part of a file (the pre-scan's finds, and the packets babeltrace2 failed to
// decode while reading). The reader goes on past each; the records reach
// Python (records.cpp) and the replay (a Damage event at the place, for the
// threads whose stream it was).
#pragma once

#include <cstdint>
#include <string>

namespace pinsight_reader {

enum class DamageKind : uint8_t {
  Cut,              // the file ends inside a packet: the rest of it is lost
  NoWholePacket,    // the file holds no whole packet: nothing of it is read
  Empty,            // the file holds no byte at all
  BadPacketHeader,  // a packet's header or context is not one (garbled bytes)
  Undecodable,      // babeltrace2 could not decode a packet's events past some point
  Stopped,          // babeltrace2 failed in a way the reader could not place: the rest is lost
  CutMetadata,      // the metadata ends inside a declaration: events it lost cannot be decoded
  BadMetadata,      // babeltrace2 cannot read the metadata: nothing of the trace is read
  BadIndex,         // the packet index (index/*.idx) is cut or wrong: rebuilt, nothing lost
};

const char *damage_kind_name(DamageKind kind);

inline constexpr uint32_t kNoStream = UINT32_MAX;

struct Damage {
  std::string file;  // the damaged file (a stream file, metadata, or an index)
  DamageKind kind;
  std::string detail;     // babeltrace2's cause, or what the pre-scan saw
  uint64_t begin_ns = 0;  // the time span lost, ns since the epoch (0: unknown)
  uint64_t end_ns = 0;
  uint64_t packets = 0;         // packets skipped (whole or in part)
  uint64_t offset = 0;          // where in the file the skipped bytes begin
  uint64_t bytes = 0;           // bytes of the file skipped
  uint64_t events_read = 0;     // events of the damaged packet read before the damage
  uint64_t events_lost = 0;     // events decoded but dropped (their time went back)
  uint32_t stream = kNoStream;  // the stream it belongs to (TraceSet's numbering)
  std::string host;             // the trace's hostname
  int64_t vpid = -1;            // per-process buffers: the process (-1: any of the trace)
};

}  // namespace pinsight_reader
