#include "stream_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

namespace pinsight_reader {
namespace {

constexpr uint32_t kPacketMagic = 0xC1FC1FC1;
constexpr uint32_t kIndexMagic = 0xC1F1DCC1;
constexpr size_t kIndexHeaderBytes = 16;
constexpr size_t kIndexEntryMinBytes = 56;  // CTF index 1.0: seven 64-bit fields

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

uint64_t be64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

uint32_t be32(const uint8_t *p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

struct IndexEntry {
  uint64_t offset, packet_bits, content_bits, ts_begin, ts_end, discarded, class_id;
  uint64_t instance_id = UINT64_MAX, seq = UINT64_MAX;  // CTF index 1.1
};

// index/NAME.idx: LTTng's packet index (big-endian), if present and well-formed.
struct IndexFile {
  bool present = false;
  bool well_formed = false;  // whole entries after a valid header
  bool complete = false;     // 1.1: every field a packet's context holds
  std::vector<IndexEntry> entries;
};

IndexFile read_index(const std::string &path) {
  IndexFile index;
  std::ifstream file(path, std::ios::binary);
  if (!file) return index;
  index.present = true;
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
  if (bytes.size() < kIndexHeaderBytes || be32(data) != kIndexMagic) return index;
  size_t entry_bytes = be32(data + 12);
  if (entry_bytes < kIndexEntryMinBytes) return index;
  size_t body = bytes.size() - kIndexHeaderBytes;
  index.complete = entry_bytes >= kIndexEntryMinBytes + 16;
  for (size_t at = kIndexHeaderBytes; at + entry_bytes <= bytes.size(); at += entry_bytes) {
    const uint8_t *e = data + at;
    IndexEntry entry{be64(e),      be64(e + 8),  be64(e + 16), be64(e + 24),
                     be64(e + 32), be64(e + 40), be64(e + 48)};
    if (index.complete) {
      entry.instance_id = be64(e + 56);
      entry.seq = be64(e + 64);
    }
    index.entries.push_back(entry);
  }
  index.well_formed = body % entry_bytes == 0;
  return index;
}

enum class PacketStatus { Ok, Cut, Bad };

class FileWalker {
 public:
  FileWalker(const CtfMetadata &metadata, int fd, uint64_t size)
      : metadata_(metadata), fd_(fd), size_(size) {
    header_bytes_ = static_cast<size_t>((metadata.header_bits + 7) / 8);
    for (const auto &[id, layout] : metadata.stream_classes) {
      need_bytes_ = std::max(need_bytes_, static_cast<size_t>((layout.end_bits + 7) / 8));
    }
    need_bytes_ = std::max(need_bytes_, header_bytes_);
    buffer_.resize(need_bytes_);
  }

  // Reads the packet at `offset`; `why` says what is wrong with it.
  PacketStatus read(uint64_t offset, PacketInfo &p, std::string &why) {
    p = PacketInfo{};
    p.offset = offset;
    uint64_t left = size_ - offset;
    size_t want = static_cast<size_t>(std::min<uint64_t>(left, need_bytes_));
    ssize_t got = pread(fd_, buffer_.data(), want, static_cast<off_t>(offset));
    if (got < 0) {
      why = std::string("cannot read: ") + std::strerror(errno);
      return PacketStatus::Bad;
    }
    auto have = static_cast<size_t>(got);
    const uint8_t *b = buffer_.data();
    if (have < header_bytes_) {
      why = "the file ends inside a packet header";
      return PacketStatus::Cut;
    }
    if (metadata_.magic.present() && metadata_.magic.read(b) != kPacketMagic) {
      why = "bad packet magic";
      return PacketStatus::Bad;
    }
    if (metadata_.has_uuid && metadata_.uuid_offset_bits >= 0 &&
        std::memcmp(b + metadata_.uuid_offset_bits / 8, metadata_.uuid.data(), 16) != 0) {
      why = "the packet header names another trace (uuid)";
      return PacketStatus::Bad;
    }
    p.class_id = metadata_.stream_id.present() ? metadata_.stream_id.read(b) : kNoStreamClassId;
    auto found = metadata_.stream_classes.find(p.class_id);
    if (found == metadata_.stream_classes.end() && !metadata_.stream_id.present() &&
        metadata_.stream_classes.size() == 1) {
      found = metadata_.stream_classes.begin();
    }
    if (found == metadata_.stream_classes.end()) {
      why = "unknown stream class " + std::to_string(p.class_id) + " in a packet header";
      return PacketStatus::Bad;
    }
    const PacketContextLayout &c = found->second;
    if (metadata_.stream_instance_id.present()) {
      p.instance_id = metadata_.stream_instance_id.read(b);
    }
    auto context_bytes = static_cast<size_t>((c.end_bits + 7) / 8);
    if (have < context_bytes) {
      why = "the file ends inside a packet context";
      return PacketStatus::Cut;
    }
    uint64_t packet_bits = c.packet_size.present() ? c.packet_size.read(b) : left * 8;
    uint64_t content_bits = c.content_size.present() ? c.content_size.read(b) : packet_bits;
    if (c.timestamp_begin.present()) {
      p.ts_begin = c.timestamp_begin.read(b);
      p.begin_ns = c.clock.ns(p.ts_begin);
    }
    if (c.timestamp_end.present()) {
      p.ts_end = c.timestamp_end.read(b);
      p.end_ns = c.clock.ns(p.ts_end);
    }
    if (c.events_discarded.present()) p.discarded = c.events_discarded.read(b);
    if (c.packet_seq_num.present()) p.seq = c.packet_seq_num.read(b);
    p.content_bits = content_bits;
    p.size = packet_bits / 8;
    if (packet_bits % 8 != 0 || packet_bits < static_cast<uint64_t>(c.end_bits) ||
        content_bits > packet_bits || content_bits < static_cast<uint64_t>(c.end_bits)) {
      why = "bad packet sizes in a packet context (packet " + std::to_string(packet_bits) +
            " bits, content " + std::to_string(content_bits) + " bits)";
      return PacketStatus::Bad;
    }
    if (c.timestamp_begin.present() && c.timestamp_end.present() && p.ts_end < p.ts_begin) {
      why = "a packet context ends before it begins";
      return PacketStatus::Bad;
    }
    if (p.size > left) {
      why = "a packet of " + std::to_string(p.size) + " bytes runs past the end of the file (" +
            std::to_string(left) + " bytes left)";
      return PacketStatus::Cut;
    }
    return PacketStatus::Ok;
  }

  // The next well-formed packet after the damage at `from`, from the index, or
  // else from the bytes (a packet's magic and trace uuid); size_ when none.
  uint64_t next_packet(uint64_t from, const IndexFile &index, const PacketInfo &first,
                       PacketInfo &next) {
    std::string why;
    for (const IndexEntry &e : index.entries) {
      if (e.offset > from && e.offset < size_ && read(e.offset, next, why) == PacketStatus::Ok &&
          same_stream(first, next)) {
        return e.offset;
      }
    }
    if (!metadata_.magic.present() || metadata_.magic.offset_bits % 8 != 0) return size_;
    uint8_t signature[4];
    for (int i = 0; i < 4; ++i) {
      int shift = metadata_.big_endian ? 24 - 8 * i : 8 * i;
      signature[i] = static_cast<uint8_t>(kPacketMagic >> shift);
    }
    auto magic_at = static_cast<uint64_t>(metadata_.magic.offset_bits / 8);
    constexpr size_t kChunk = size_t{1} << 20;
    std::vector<uint8_t> chunk(kChunk + 3);
    for (uint64_t base = from + 1; base + magic_at < size_; base += kChunk) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk + 3, size_ - (base + magic_at)));
      ssize_t got = pread(fd_, chunk.data(), want, static_cast<off_t>(base + magic_at));
      if (got < 4) break;
      const uint8_t *p = chunk.data();
      const uint8_t *end = chunk.data() + got;
      while (p + 4 <= end) {
        const void *hit = memmem(p, static_cast<size_t>(end - p), signature, 4);
        if (hit == nullptr) break;
        auto at = static_cast<size_t>(static_cast<const uint8_t *>(hit) - chunk.data());
        if (at >= kChunk) break;  // the next chunk starts there
        uint64_t candidate = base + at;
        if (read(candidate, next, why) == PacketStatus::Ok && same_stream(first, next)) {
          return candidate;
        }
        p = static_cast<const uint8_t *>(hit) + 1;
      }
    }
    return size_;
  }

  // Whether the file holds only zero bytes from `from` to its end.
  bool zeros_from(uint64_t from) {
    std::vector<uint8_t> chunk(size_t{1} << 16);
    for (uint64_t at = from; at < size_;) {
      ssize_t got = pread(fd_, chunk.data(),
                          static_cast<size_t>(std::min<uint64_t>(chunk.size(), size_ - at)),
                          static_cast<off_t>(at));
      if (got <= 0) return false;
      for (ssize_t i = 0; i < got; ++i) {
        if (chunk[static_cast<size_t>(i)] != 0) return false;
      }
      at += static_cast<uint64_t>(got);
    }
    return true;
  }

  // Packets of one file belong to one stream (babeltrace2 reads the first's ids only).
  static bool same_stream(const PacketInfo &first, const PacketInfo &p) {
    return first.size == 0 || (p.class_id == first.class_id && p.instance_id == first.instance_id);
  }

 private:
  const CtfMetadata &metadata_;
  int fd_;
  uint64_t size_;
  size_t header_bytes_ = 0;
  size_t need_bytes_ = 0;
  std::vector<uint8_t> buffer_;
};

// The packets of an intact file from its index, without reading each header:
// the index must cover the file packet after packet, and the first and last
// packets' headers must agree with it. A packet garbled in between is then
// babeltrace2's to find while decoding (trace_graph.h goes on past it).
bool packets_from_index(const CtfMetadata &metadata, const IndexFile &index, FileWalker &walker,
                        StreamFileScan &file) {
  if (!index.well_formed || !index.complete || index.entries.empty()) return false;
  uint64_t next = 0;
  for (const IndexEntry &e : index.entries) {
    if (e.offset != next || e.packet_bits % 8 != 0 || e.packet_bits == 0 ||
        e.content_bits > e.packet_bits || e.ts_end < e.ts_begin) {
      return false;
    }
    next += e.packet_bits / 8;
  }
  if (next != file.size) return false;
  for (const IndexEntry *e : {&index.entries.front(), &index.entries.back()}) {
    PacketInfo p;
    std::string why;
    if (walker.read(e->offset, p, why) != PacketStatus::Ok || p.size * 8 != e->packet_bits ||
        p.ts_begin != e->ts_begin || p.instance_id != e->instance_id) {
      return false;
    }
  }
  auto layout = metadata.stream_classes.find(
      metadata.stream_id.present() ? index.entries.front().class_id : kNoStreamClassId);
  if (layout == metadata.stream_classes.end()) layout = metadata.stream_classes.begin();
  const ClockInfo &clock = layout->second.clock;
  for (const IndexEntry &e : index.entries) {
    PacketInfo p;
    p.offset = e.offset;
    p.size = e.packet_bits / 8;
    p.content_bits = e.content_bits;
    p.ts_begin = e.ts_begin;
    p.ts_end = e.ts_end;
    p.begin_ns = clock.ns(e.ts_begin);
    p.end_ns = clock.ns(e.ts_end);
    p.discarded = e.discarded;
    p.seq = e.seq;
    p.class_id = metadata.stream_id.present() ? e.class_id : kNoStreamClassId;
    p.instance_id = e.instance_id;
    file.packets.push_back(p);
  }
  return true;
}

void walk_file(const TraceDirScan &scan, StreamFileScan &file, const std::string &path) {
  Fd fd{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  Damage damage;
  damage.file = path;
  damage.host = scan.metadata.hostname;
  damage.vpid = scan.metadata.vpid;
  if (fd.fd < 0) {
    damage.kind = DamageKind::NoWholePacket;
    damage.detail = std::string("cannot open: ") + std::strerror(errno);
    file.damages.push_back(damage);
    return;
  }
  if (file.size == 0) {
    damage.kind = DamageKind::Empty;
    damage.detail = "the file is empty";
    file.damages.push_back(damage);
    return;
  }
  IndexFile index = read_index(scan.dir + "/index/" + file.name + ".idx");
  file.index_present = index.present;
  FileWalker walker(scan.metadata, fd.fd, file.size);
  if (packets_from_index(scan.metadata, index, walker, file)) {
    file.index_usable = true;
    return;
  }
  PacketInfo first;  // size 0 until the first good packet
  uint64_t offset = 0;
  while (offset < file.size) {
    PacketInfo p;
    std::string why;
    PacketStatus status = walker.read(offset, p, why);
    if (status == PacketStatus::Ok && !FileWalker::same_stream(first, p)) {
      status = PacketStatus::Bad;
      why = "a packet header names another stream than the file's first packet";
    }
    if (status == PacketStatus::Ok) {
      if (first.size == 0) first = p;
      file.packets.push_back(p);
      offset += p.size;
      continue;
    }
    PacketInfo next;
    uint64_t resume = walker.next_packet(offset, index, first, next);
    Damage d = damage;
    // The file ends inside the packet, or holds only zeros from there (what a
    // crash leaves as often as a short file): cut there.
    bool cut = status == PacketStatus::Cut || (resume == file.size && walker.zeros_from(offset));
    d.kind = cut ? DamageKind::Cut : DamageKind::BadPacketHeader;
    d.detail = why + " at byte " + std::to_string(offset);
    d.offset = offset;
    d.bytes = resume - offset;
    d.packets = 0;
    for (const IndexEntry &e : index.entries) d.packets += e.offset >= offset && e.offset < resume;
    d.packets = std::max<uint64_t>(d.packets, 1);
    // The time lost: from the previous packet's end (or the damaged packet's own
    // begin, when its context could be read) to the next packet's begin.
    uint64_t previous_end = file.packets.empty() ? 0 : file.packets.back().end_ns;
    bool own_times = status == PacketStatus::Cut && p.begin_ns != 0 && p.begin_ns >= previous_end;
    d.begin_ns = own_times ? p.begin_ns : previous_end;
    if (resume < file.size) {
      d.end_ns = next.begin_ns;
    } else if (own_times && p.end_ns >= p.begin_ns) {
      d.end_ns = p.end_ns;
    }
    file.damages.push_back(d);
    offset = resume;
  }
  if (file.packets.empty()) {
    // Nothing of it can be read: one record for the whole file.
    Damage whole = file.damages.front();
    whole.kind = DamageKind::NoWholePacket;
    whole.offset = 0;
    whole.bytes = file.size;
    whole.packets = 0;
    for (const Damage &d : file.damages) whole.packets += d.packets;
    file.damages.assign(1, whole);
  }
  if (index.present) {
    // Exactly the packets the walk found, or babeltrace2 must not see it.
    bool same =
        index.well_formed && file.damages.empty() && index.entries.size() == file.packets.size();
    for (size_t i = 0; same && i < file.packets.size(); ++i) {
      same = index.entries[i].offset == file.packets[i].offset &&
             index.entries[i].packet_bits == file.packets[i].size * 8;
    }
    file.index_usable = same;
  }
}

}  // namespace

const char *damage_kind_name(DamageKind kind) {
  switch (kind) {
    case DamageKind::Cut:
      return "cut";
    case DamageKind::NoWholePacket:
      return "no_whole_packet";
    case DamageKind::Empty:
      return "empty";
    case DamageKind::BadPacketHeader:
      return "bad_packet_header";
    case DamageKind::Undecodable:
      return "undecodable";
    case DamageKind::Stopped:
      return "stopped";
    case DamageKind::CutMetadata:
      return "cut_metadata";
    case DamageKind::BadMetadata:
      return "bad_metadata";
    case DamageKind::BadIndex:
      return "bad_index";
  }
  return "unknown";
}

TraceDirScan scan_trace_dir(const std::string &dir) {
  TraceDirScan scan;
  scan.dir = dir;
  scan.metadata = read_ctf_metadata(dir);
  if (scan.metadata.cut) {
    Damage d;
    d.file = dir + "/metadata";
    d.kind = DamageKind::CutMetadata;
    d.detail = "the metadata ends inside a declaration (" +
               std::to_string(scan.metadata.lost_bytes) +
               " bytes after its last whole one): events of the classes it lost cannot be decoded";
    d.host = scan.metadata.hostname;
    d.vpid = scan.metadata.vpid;
    scan.damages.push_back(d);
  }
  // babeltrace2's own listing rules (source.ctf.fs): every regular file but the
  // metadata and hidden ones, in directory order.
  DIR *listing = opendir(dir.c_str());
  if (listing == nullptr) return scan;
  while (const dirent *entry = readdir(listing)) {
    std::string name = entry->d_name;
    if (name == "metadata" || name.empty() || name[0] == '.') continue;
    struct stat st {};
    if (stat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    StreamFileScan file;
    file.name = name;
    file.size = static_cast<uint64_t>(st.st_size);
    scan.files.push_back(std::move(file));
  }
  closedir(listing);
  scan.walked = scan.metadata.layout_known;
  if (!scan.walked) return scan;
  for (StreamFileScan &file : scan.files) {
    walk_file(scan, file, dir + "/" + file.name);
    if (file.index_present && !file.index_usable && file.damages.empty()) {
      Damage d;
      d.file = dir + "/index/" + file.name + ".idx";
      d.kind = DamageKind::BadIndex;
      d.detail =
          "the packet index does not match its stream file (cut, or written before the "
          "last packets): the stream file is indexed anew, nothing is lost";
      d.host = scan.metadata.hostname;
      d.vpid = scan.metadata.vpid;
      scan.damages.push_back(d);
    }
  }
  return scan;
}

}  // namespace pinsight_reader
