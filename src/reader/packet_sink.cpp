#include "packet_sink.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "proto_encoder.h"
#include "trace_graph.h"

namespace pinsight_reader {
namespace {

// Trace.packet and TracePacket.compressed_packets.
constexpr uint32_t kTracePacket = 1;
constexpr uint32_t kCompressedPackets = 50;

}  // namespace

PacketSink::PacketSink(const std::string &path, bool compress) : path_(path), compress_(compress) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    throw OutputError("cannot write " + path + ": " + std::strerror(errno));
  }
  if (compress_) thread_ = std::thread([this] { run(); });
}

PacketSink::~PacketSink() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
      queue_.clear();
    }
    changed_.notify_all();
    thread_.join();
  }
  if (file_ != nullptr) std::fclose(file_);
}

void PacketSink::fail(int error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ == 0) error_ = error != 0 ? error : EIO;
}

void PacketSink::check() const {
  if (error_ != 0) throw OutputError("cannot write " + path_ + ": " + std::strerror(error_));
}

void PacketSink::write_chunk(const std::string &chunk) {
  const std::string *bytes = &chunk;
  if (compress_) {
    uLongf size = compressBound(chunk.size());
    // The outer packet's header: at most 1 + 5 bytes each for the two tags and lengths.
    compressed_.resize(16 + size);
    int status =
        compress2(reinterpret_cast<Bytef *>(&compressed_[16]), &size,
                  reinterpret_cast<const Bytef *>(chunk.data()), chunk.size(), Z_BEST_SPEED);
    if (status != Z_OK) {
      fail(status == Z_MEM_ERROR ? ENOMEM : EIO);
      return;
    }
    std::string header;
    ProtoEncoder out(header);
    out.tag(kTracePacket, ProtoEncoder::kLength);
    out.varint(ProtoEncoder::varint_size((uint64_t{kCompressedPackets} << 3) | 2) +
               ProtoEncoder::varint_size(size) + size);
    out.tag(kCompressedPackets, ProtoEncoder::kLength);
    out.varint(size);
    std::memcpy(&compressed_[16 - header.size()], header.data(), header.size());
    compressed_.erase(0, 16 - header.size());
    compressed_.resize(header.size() + size);
    bytes = &compressed_;
  }
  if (std::fwrite(bytes->data(), 1, bytes->size(), file_) != bytes->size()) {
    fail(errno);
    return;
  }
  bytes_written_ += bytes->size();
}

void PacketSink::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !queue_.empty() || closing_; });
    if (queue_.empty()) return;
    std::string chunk = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    write_chunk(chunk);
    chunk.clear();
    lock.lock();
    spare_.push_back(std::move(chunk));
    changed_.notify_all();
  }
}

void PacketSink::write(std::string &chunk) {
  if (chunk.empty()) return;
  if (!compress_) {
    write_chunk(chunk);
    chunk.clear();
    check();
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.size() < kChunksInFlight || error_ != 0; });
  check();
  queue_.push_back(std::move(chunk));
  if (!spare_.empty()) {
    chunk = std::move(spare_.front());
    spare_.pop_front();
  } else {
    chunk = std::string();
    chunk.reserve(kChunkBytes + 4096);
  }
  changed_.notify_all();
}

void PacketSink::finish() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    changed_.notify_all();
    thread_.join();  // it writes what is queued before it stops
  }
  int close_status = std::fclose(file_);
  file_ = nullptr;
  if (close_status != 0) fail(errno);
  check();
}

}  // namespace pinsight_reader
