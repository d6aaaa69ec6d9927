#include "trace_set.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "trace_graph.h"

namespace pinsight_reader {
namespace {

// source.ctf.fs's port names: "UUID | CLASS | ID", with the trace's path in place
// of the UUID when it has none, and a stream file's path in place of the ID when
// the packets carry none.
struct PortName {
  uint64_t class_id = kNoStreamClassId;
  uint64_t instance_id = UINT64_MAX;
  std::string file;  // the stream file's name, when the port names it
};

bool all_digits(const std::string &s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

PortName parse_port(const std::string &port) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t bar; (bar = port.find(" | ", start)) != std::string::npos; start = bar + 3) {
    parts.push_back(port.substr(start, bar - start));
  }
  parts.push_back(port.substr(start));
  PortName out;
  if (parts.size() < 2) return out;
  const std::string &last = parts.back();
  if (all_digits(last)) {
    out.instance_id = std::stoull(last);
  } else {
    size_t slash = last.rfind('/');
    out.file = slash == std::string::npos ? last : last.substr(slash + 1);
  }
  if (parts.size() >= 3 && all_digits(parts[parts.size() - 2])) {
    out.class_id = std::stoull(parts[parts.size() - 2]);
  }
  return out;
}

void replace_all(std::string &text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

bool same_entry(const PacketInfo &a, const PacketInfo &b) {
  return a.size == b.size && a.ts_begin == b.ts_begin && a.ts_end == b.ts_end && a.seq == b.seq;
}

}  // namespace

TraceSet::TraceSet(const std::vector<std::string> &trace_dirs) {
  if (trace_dirs.empty()) throw ReaderError("no trace directory given");
  dirs_.resize(trace_dirs.size());
  for (size_t d = 0; d < trace_dirs.size(); ++d) {
    Dir &dir = dirs_[d];
    dir.original = trace_dirs[d];
    char *resolved = realpath(dir.original.c_str(), nullptr);
    dir.absolute = resolved ? resolved : dir.original;
    free(resolved);
    dir.scan = scan_trace_dir(dir.original);
    dir.excluded.assign(dir.scan.files.size(), false);
    for (const Damage &damage : dir.scan.damages) damages_.push_back(damage);
    for (size_t f = 0; f < dir.scan.files.size(); ++f) {
      const StreamFileScan &file = dir.scan.files[f];
      // babeltrace2 skips an empty file and refuses one without a whole packet.
      dir.excluded[f] = dir.scan.walked && file.packets.empty();
      for (const Damage &damage : file.damages) damages_.push_back(damage);
    }
    open(d);
  }
  bool any =
      std::any_of(dirs_.begin(), dirs_.end(), [](const Dir &d) { return !d.read_path.empty(); });
  if (!any) {
    std::string why;
    for (const Damage &d : damages_) {
      if (d.kind == DamageKind::BadMetadata || d.kind == DamageKind::Stopped) {
        why += (why.empty() ? "" : "; ") + d.detail;
      }
    }
    throw ReaderError("cannot open the CTF trace" + std::string(dirs_.size() > 1 ? "s" : "") +
                      " in " + dirs_.front().original + (dirs_.size() > 1 ? "..." : "") + ": " +
                      why);
  }
}

TraceSet::~TraceSet() = default;

const PacketInfo &TraceSet::packet(const TraceStream &stream, size_t index) const {
  const PacketRef &ref = stream.packets[index];
  return dirs_[stream.dir].scan.files[ref.file].packets[ref.packet];
}

const std::string &TraceSet::file_of(const TraceStream &stream, size_t index) const {
  return dirs_[stream.dir].scan.files[stream.packets[index].file].name;
}

uint32_t TraceSet::stream_of_port(size_t dir, const std::string &port) const {
  auto found = ports_.find({dir, port});
  if (found != ports_.end()) return found->second;
  // A view's port: the same stream, the path in its name aside.
  PortName name = parse_port(port);
  return stream_of(dir, name.class_id, name.instance_id, name.file);
}

uint32_t TraceSet::stream_of(size_t dir, uint64_t class_id, uint64_t stream_id,
                             const std::string &name) const {
  size_t slash = name.rfind('/');
  std::string file = slash == std::string::npos ? name : name.substr(slash + 1);
  for (uint32_t s = 0; s < streams_.size(); ++s) {
    const TraceStream &stream = streams_[s];
    if (stream.dir != dir) continue;
    if (stream.instance_id != UINT64_MAX) {
      if (stream.instance_id == stream_id &&
          (stream.class_id == kNoStreamClassId || class_id == kNoStreamClassId ||
           stream.class_id == class_id)) {
        return s;
      }
    } else if (!stream.packets.empty() && file_of(stream, 0) == file) {
      return s;
    }
  }
  return kNoStream;
}

void TraceSet::open(size_t d) {
  Dir &dir = dirs_[d];
  const TraceDirScan &scan = dir.scan;
  bool needs_view =
      scan.metadata.cut || std::any_of(scan.files.begin(), scan.files.end(),
                                       [](const StreamFileScan &f) { return f.needs_view(); });
  for (size_t attempt = 0; attempt <= scan.files.size(); ++attempt) {
    dir.view = needs_view ? base_view(d) : nullptr;
    dir.read_path = dir.view ? dir.view->path() : dir.original;
    std::vector<std::string> ports;
    try {
      ports = source_ports(dir.read_path, d);
    } catch (const ReaderError &error) {
      // The view's path means nothing to the user: the directory's own instead.
      std::string cause = error.what();
      if (dir.view) replace_all(cause, dir.read_path, dir.original);
      // A stream file babeltrace2 names in its cause is left out, and the
      // directory tried again without it (unless the metadata is to blame).
      bool left_out = false;
      bool metadata_fault = scan.metadata.cut || !scan.metadata.found;
      for (size_t f = 0; f < scan.files.size() && !metadata_fault; ++f) {
        if (dir.excluded[f]) continue;
        std::string path = dir.original + "/" + scan.files[f].name;
        for (char quote : {'\'', '`', '"'}) {
          if (cause.find(path + quote) == std::string::npos) continue;
          Damage damage;
          damage.file = dir.original + "/" + scan.files[f].name;
          damage.kind = DamageKind::NoWholePacket;
          damage.detail = "babeltrace2 cannot index it: " + cause;
          damage.bytes = scan.files[f].size;
          damage.host = scan.metadata.hostname;
          damage.vpid = scan.metadata.vpid;
          damages_.push_back(damage);
          dir.excluded[f] = true;
          left_out = true;
          break;
        }
      }
      if (left_out) {
        needs_view = true;
        continue;
      }
      Damage damage;
      damage.file = dir.original + "/metadata";
      damage.kind = metadata_fault || cause.find("etadata") != std::string::npos
                        ? DamageKind::BadMetadata
                        : DamageKind::Stopped;
      if (damage.kind == DamageKind::Stopped) damage.file = dir.original;
      std::string why;
      if (scan.metadata.cut && scan.metadata.stream_classes.empty()) {
        // LTTng-UST 2.13 writes a channel's stream declaration after the event
        // declarations of the providers registered when the application registered.
        why =
            "the metadata is cut before its stream declaration (LTTng writes it after the "
            "first event declarations): babeltrace2 has no layout to decode the stream files "
            "with";
      } else if (!scan.metadata.problem.empty() && !scan.metadata.layout_known) {
        why = scan.metadata.problem;
      }
      damage.detail = "nothing of this trace can be read: " + (why.empty() ? "" : why + " (") +
                      "babeltrace2: " + cause + (why.empty() ? "" : ")");
      damage.host = scan.metadata.hostname;
      damage.vpid = scan.metadata.vpid;
      damages_.push_back(damage);
      dir.view.reset();
      dir.read_path.clear();
      return;
    }
    make_streams(d, ports);
    return;
  }
}

std::unique_ptr<TraceView> TraceSet::empty_view(size_t d) const {
  const Dir &dir = dirs_[d];
  auto view = std::make_unique<TraceView>();
  if (dir.scan.metadata.cut) {
    view->write("metadata", dir.scan.metadata.text);  // its whole declarations
  } else {
    view->link("metadata", dir.absolute + "/metadata");
  }
  return view;
}

std::unique_ptr<TraceView> TraceSet::base_view(size_t d) const {
  const Dir &dir = dirs_[d];
  const TraceDirScan &scan = dir.scan;
  auto view = empty_view(d);
  for (size_t f = 0; f < scan.files.size(); ++f) {
    const StreamFileScan &file = scan.files[f];
    if (dir.excluded[f]) continue;
    std::string source = dir.absolute + "/" + file.name;
    std::string index = dir.absolute + "/index/" + file.name + ".idx";
    if (!scan.walked) {
      view->link(file.name, source);
      if (access(index.c_str(), R_OK) == 0) view->link_index(file.name, index);
      continue;
    }
    if (file.packets.empty()) continue;  // empty: babeltrace2 would skip it anyway
    if (!file.needs_view()) {
      view->link(file.name, source);
      if (file.index_usable) view->link_index(file.name, index);
      continue;
    }
    uint64_t shift = file.packets.front().offset;
    if (shift == 0) {
      view->link(file.name, source);
    } else {
      view->copy_tail(file.name, source, shift);
    }
    std::vector<const PacketInfo *> all;
    for (const PacketInfo &p : file.packets) all.push_back(&p);
    view->write_index(file.name, all, shift, file.size - shift);
  }
  return view;
}

void TraceSet::make_streams(size_t d, const std::vector<std::string> &ports) {
  const Dir &dir = dirs_[d];
  const TraceDirScan &scan = dir.scan;
  // babeltrace2's order of the files: the directory's it reads.
  std::vector<size_t> order;
  if (dir.view) {
    for (const std::string &name : dir.view->listing()) {
      for (size_t f = 0; f < scan.files.size(); ++f) {
        if (scan.files[f].name == name) order.push_back(f);
      }
    }
  } else {
    for (size_t f = 0; f < scan.files.size(); ++f) order.push_back(f);
  }
  for (const std::string &port : ports) {
    TraceStream stream;
    stream.dir = d;
    stream.port = port;
    PortName name = parse_port(port);
    stream.class_id = name.class_id;
    stream.instance_id = name.instance_id;
    auto index = static_cast<uint32_t>(streams_.size());
    ports_[{d, port}] = index;
    if (scan.walked) {
      // Its files in babeltrace2's order: the first one's packets as they are,
      // the others' put in by their begin time (source.ctf.fs's merge).
      for (size_t f : order) {
        const StreamFileScan &file = scan.files[f];
        if (dir.excluded[f] || file.packets.empty()) continue;
        const PacketInfo &first = file.packets.front();
        bool mine = name.file.empty()
                        ? first.instance_id == name.instance_id &&
                              (name.class_id == kNoStreamClassId || first.class_id == name.class_id)
                        : file.name == name.file;
        if (!mine) continue;
        bool first_file = stream.packets.empty();
        for (uint32_t k = 0; k < file.packets.size(); ++k) {
          const PacketInfo &p = file.packets[k];
          PacketRef ref{static_cast<uint32_t>(f), k};
          if (first_file) {
            stream.packets.push_back(ref);
            continue;
          }
          auto at =
              std::find_if(stream.packets.begin(), stream.packets.end(), [&](const PacketRef &r) {
                return p.begin_ns <= scan.files[r.file].packets[r.packet].begin_ns;
              });
          if (at != stream.packets.end() &&
              same_entry(p, scan.files[at->file].packets[at->packet])) {
            continue;
          }
          stream.packets.insert(at, ref);
        }
      }
      // The damage around each packet, from its file's scan.
      stream.skipped_before.assign(stream.packets.size(), 0);
      stream.damage_after.assign(stream.packets.size(), 0);
      stream.damage_index.assign(stream.packets.size(), 0);
      for (size_t i = 0; i < stream.packets.size(); ++i) {
        const PacketRef &ref = stream.packets[i];
        const StreamFileScan &file = scan.files[ref.file];
        const PacketInfo &p = file.packets[ref.packet];
        uint64_t previous_end = ref.packet == 0 ? 0
                                                : file.packets[ref.packet - 1].offset +
                                                      file.packets[ref.packet - 1].size;
        std::string path = dir.original + "/" + file.name;
        for (size_t k = 0; k < damages_.size(); ++k) {
          Damage &damage = damages_[k];
          if (damage.file != path) continue;
          damage.stream = index;
          // A skipped region starts where the packet before it ended.
          uint64_t region = damage.offset;
          if (region >= previous_end && region < p.offset)
            stream.skipped_before[i] += damage.packets;
          if (region == p.offset + p.size) {
            stream.damage_after[i] = 1;
            stream.damage_index[i] = static_cast<uint32_t>(k);
          }
        }
      }
    }
    streams_.push_back(std::move(stream));
  }
}

std::unique_ptr<TraceView> TraceSet::view(
    size_t d, const std::vector<std::pair<uint32_t, std::vector<size_t>>> &selection) const {
  const Dir &dir = dirs_[d];
  const TraceDirScan &scan = dir.scan;
  auto view = empty_view(d);
  // Per file, the packets to read, in file order.
  std::map<uint32_t, std::vector<const PacketInfo *>> files;
  for (const auto &[s, packets] : selection) {
    const TraceStream &stream = streams_[s];
    for (size_t i : packets) {
      const PacketRef &ref = stream.packets[i];
      files[ref.file].push_back(&scan.files[ref.file].packets[ref.packet]);
    }
  }
  for (auto &[f, packets] : files) {
    const StreamFileScan &file = scan.files[f];
    std::sort(packets.begin(), packets.end(),
              [](const PacketInfo *a, const PacketInfo *b) { return a->offset < b->offset; });
    // A file whose first packet is unreadable is read from the base view's copy.
    uint64_t shift = file.packets.front().offset;
    std::string source = shift == 0 || !dir.view ? dir.absolute + "/" + file.name
                                                 : dir.view->path() + "/" + file.name;
    view->link(file.name, source);
    view->write_index(file.name, packets, shift, file.size - shift);
  }
  return view;
}

}  // namespace pinsight_reader
