// Where the Perfetto writer's packets go: a file, written in chunks of whole
// packets. Compressed, each chunk becomes one packet of its own whose
// compressed_packets field holds the chunk deflated (zlib, as Perfetto's
// tracing service writes them and trace_processor and the UI read them), on a
// thread of its own so that the replay never waits for zlib; at most
// kChunksInFlight chunks wait, so memory stays bounded whatever the trace.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace pinsight_reader {

class PacketSink {
 public:
  // Throws OutputError when `path` cannot be opened for writing.
  PacketSink(const std::string &path, bool compress);
  ~PacketSink();
  PacketSink(const PacketSink &) = delete;
  PacketSink &operator=(const PacketSink &) = delete;

  // Hands over a chunk of whole packets (each `0x0a length TracePacket`);
  // `chunk` comes back empty. Throws OutputError once a write has failed.
  void write(std::string &chunk);
  // Writes what is left and closes the file; throws OutputError naming the
  // file and the reason when any write failed (a full disk).
  void finish();
  uint64_t bytes_written() const { return bytes_written_; }

  static constexpr size_t kChunkBytes = 1 << 20;

 private:
  static constexpr size_t kChunksInFlight = 4;

  void run();
  void write_chunk(const std::string &chunk);
  void fail(int error);
  void check() const;

  std::string path_;
  std::FILE *file_ = nullptr;
  bool compress_;
  std::string compressed_;  // the compressing thread's buffer

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;  // chunks waiting for the compressing thread
  std::deque<std::string> spare_;  // their buffers, handed back
  bool closing_ = false;
  int error_ = 0;  // errno of the first failed write
  uint64_t bytes_written_ = 0;
  std::thread thread_;
};

}  // namespace pinsight_reader
