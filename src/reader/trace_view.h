// A trimmed view of a damaged CTF trace directory, which babeltrace2 reads
// instead of it: a temporary directory holding a symbolic link to each
// stream file it should read, and an index (index/NAME.idx, LTTng's format)
// per stream file that lists only the packets to read. babeltrace2 goes from
// packet to packet by the index, so the damaged ones are never decoded.
//
// What it costs: a link and 72 bytes of index per packet, the metadata's text
// when the metadata was cut, and a copy of a stream file only when its first
// packet is unreadable (babeltrace2 reads the first packet's header to know
// the stream: the copy starts at the first good packet).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stream_scan.h"

namespace pinsight_reader {

class TraceView {
 public:
  // A new empty directory under $TMPDIR (or /tmp); throws ReaderError.
  TraceView();
  // Removes what it made.
  ~TraceView();
  TraceView(const TraceView &) = delete;
  TraceView &operator=(const TraceView &) = delete;

  const std::string &path() const { return path_; }

  void link(const std::string &name, const std::string &target);
  // index/NAME.idx, a link to `target`.
  void link_index(const std::string &name, const std::string &target);
  void write(const std::string &name, const std::string &bytes);
  // A copy of `source` from byte `from` on (copy_file_range: shared blocks where
  // the file system can).
  void copy_tail(const std::string &name, const std::string &source, uint64_t from);
  // index/NAME.idx listing `packets` (offsets in the file as the view has it:
  // `shift` bytes less). Their sizes, as the index states them, cover the whole
  // file (babeltrace2 checks that): each runs to the next listed packet.
  void write_index(const std::string &name, const std::vector<const PacketInfo *> &packets,
                   uint64_t shift, uint64_t file_size);
  // The names of its files in directory order (babeltrace2's order).
  std::vector<std::string> listing() const;

 private:
  void make_index_dir();

  std::string path_;
  std::vector<std::string> made_;  // files, then directories, to remove
  bool index_dir_ = false;
};

}  // namespace pinsight_reader
