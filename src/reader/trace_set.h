// The trace directories of one read, scanned (stream_scan.h) before
// babeltrace2 opens them: the streams babeltrace2 will offer, each stream's
// packets in the order it reads them, and a trimmed view (trace_view.h) in
// place of each directory it would otherwise refuse whole. A directory
// babeltrace2 still cannot open (its metadata unreadable) is left out and
// reported. Built once per read, then shared read-only by the decoding
// threads' graphs (trace_graph.h), which make their own views to go on past
// a packet babeltrace2 fails to decode.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "damage.h"
#include "stream_scan.h"
#include "trace_view.h"

namespace pinsight_reader {

// A packet of a directory's scan: files[file].packets[packet].
struct PacketRef {
  uint32_t file;
  uint32_t packet;
};

// One babeltrace2 stream (a port of its source): one or more stream files.
struct TraceStream {
  size_t dir = 0;
  uint64_t class_id = kNoStreamClassId;
  uint64_t instance_id = UINT64_MAX;
  std::string port;  // its port's name (stable across views of the directory)
  // Its good packets in babeltrace2's order (empty: the directory was not walked).
  std::vector<PacketRef> packets;
  // Per packet: packets the scan skipped right before it (damage), and whether
  // damage follows it (skipped packets, or the file cut after it).
  std::vector<uint32_t> skipped_before;
  std::vector<uint8_t> damage_after;
  std::vector<uint32_t> damage_index;  // per packet with damage_after: into TraceSet::damages()
};

class TraceSet {
 public:
  // Scans the directories and opens each with babeltrace2 once (its streams'
  // ports). Throws ReaderError when no directory at all can be read.
  explicit TraceSet(const std::vector<std::string> &trace_dirs);
  ~TraceSet();
  TraceSet(const TraceSet &) = delete;
  TraceSet &operator=(const TraceSet &) = delete;

  size_t dirs() const { return dirs_.size(); }
  const std::string &original(size_t dir) const { return dirs_[dir].original; }
  // What babeltrace2 reads for the directory: itself or its view ("": left out).
  const std::string &read_path(size_t dir) const { return dirs_[dir].read_path; }
  const TraceDirScan &scan(size_t dir) const { return dirs_[dir].scan; }
  bool walked(size_t dir) const { return dirs_[dir].scan.walked; }
  const PacketInfo &packet(const TraceStream &stream, size_t index) const;
  const std::string &file_of(const TraceStream &stream, size_t index) const;

  // Every stream, in the order of the directories' ports.
  const std::vector<TraceStream> &streams() const { return streams_; }
  // The stream of a port of the directory's source (in any view of it), or kNoStream.
  uint32_t stream_of_port(size_t dir, const std::string &port) const;
  // The stream babeltrace2 made of the directory's stream class `class_id`, id
  // `stream_id` (the packets' stream_instance_id), named `name` (its first
  // file's path), or kNoStream.
  uint32_t stream_of(size_t dir, uint64_t class_id, uint64_t stream_id,
                     const std::string &name) const;
  // What the pre-scan found, and the directories left out.
  const std::vector<Damage> &damages() const { return damages_; }

  // A view of `dir` holding the given packets (indexes into TraceStream::packets)
  // of the given streams, and nothing else.
  std::unique_ptr<TraceView> view(
      size_t dir, const std::vector<std::pair<uint32_t, std::vector<size_t>>> &selection) const;

 private:
  struct Dir {
    std::string original;
    std::string absolute;  // what a view's links point to
    std::string read_path;
    TraceDirScan scan;
    std::unique_ptr<TraceView> view;
    std::vector<bool> excluded;  // per scan file: left out of every view
  };

  void open(size_t dir);
  void make_streams(size_t dir, const std::vector<std::string> &ports);
  // A view holding the directory's metadata (the whole declarations of a cut one).
  std::unique_ptr<TraceView> empty_view(size_t dir) const;
  std::unique_ptr<TraceView> base_view(size_t dir) const;

  std::vector<Dir> dirs_;
  std::vector<TraceStream> streams_;
  std::map<std::tuple<size_t, std::string>, uint32_t> ports_;
  std::vector<Damage> damages_;
};

}  // namespace pinsight_reader
