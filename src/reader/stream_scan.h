// The pre-scan of a CTF trace directory: finds what babeltrace2 would refuse
// the whole trace for: a file cut inside a packet, a garbled packet header, a
// packet size that runs past the end, a file with no whole packet, an index
// (index/NAME.idx) that is cut or does not match its file.
//
// A file whose index covers it packet after packet, its first and last
// packets' headers agreeing, is taken from the index: two small reads (a
// packet garbled in between is babeltrace2's to find, trace_graph.h). Any
// other file is walked packet by packet, reading each packet's header and
// context only and seeking over the rest; after a bad packet the walk goes on
// at the next packet the index names, or else at the next packet header found
// in the bytes. Nothing is read per event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ctf_metadata.h"
#include "damage.h"

namespace pinsight_reader {

struct PacketInfo {
  uint64_t offset = 0;  // bytes, in its file
  uint64_t size = 0;    // bytes
  uint64_t content_bits = 0;
  uint64_t ts_begin = 0, ts_end = 0;  // clock cycles, as the packet context holds them
  uint64_t begin_ns = 0, end_ns = 0;  // ns since the epoch (0: no timestamps)
  uint64_t discarded = 0;             // the stream's events_discarded counter
  uint64_t seq = UINT64_MAX;          // packet_seq_num (UINT64_MAX: absent)
  uint64_t class_id = kNoStreamClassId;
  uint64_t instance_id = UINT64_MAX;  // stream_instance_id (UINT64_MAX: absent)
};

struct StreamFileScan {
  std::string name;  // in the trace directory
  uint64_t size = 0;
  std::vector<PacketInfo> packets;  // the whole, well-formed packets, in file order
  std::vector<Damage> damages;      // what the walk had to skip
  bool index_usable = false;        // index/NAME.idx matches the packets exactly
  bool index_present = false;

  // The file needs a trimmed view: babeltrace2 would fail on it as it is.
  // (babeltrace2 skips an empty file by itself).
  bool needs_view() const {
    return size > 0 && (!damages.empty() || (index_present && !index_usable));
  }
};

struct TraceDirScan {
  std::string dir;
  CtfMetadata metadata;
  bool walked = false;  // the layout was known and the files were walked
  // Data stream files as babeltrace2 lists them (directory order; no metadata,
  // no hidden or non-regular files).
  std::vector<StreamFileScan> files;
  std::vector<Damage> damages;  // the directory's own: metadata, indexes
};

// Never throws: a file it cannot read is damage.
TraceDirScan scan_trace_dir(const std::string &dir);

}  // namespace pinsight_reader
