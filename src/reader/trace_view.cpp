#include "trace_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "reader_error.h"

namespace pinsight_reader {
namespace {

constexpr uint32_t kIndexMagic = 0xC1F1DCC1;
constexpr uint32_t kIndexEntryBytes = 72;  // CTF index 1.1

void put_be(std::string &out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

[[noreturn]] void fail(const std::string &what) {
  throw ReaderError("cannot make a trimmed view of a damaged trace: " + what + ": " +
                    std::strerror(errno));
}

}  // namespace

TraceView::TraceView() {
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/pinsight-python-view-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) fail(pattern);
  path_ = pattern;
}

TraceView::~TraceView() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) unlink(it->c_str());
  if (index_dir_) rmdir((path_ + "/index").c_str());
  rmdir(path_.c_str());
}

void TraceView::link(const std::string &name, const std::string &target) {
  std::string at = path_ + "/" + name;
  if (symlink(target.c_str(), at.c_str()) != 0) fail(at);
  made_.push_back(at);
}

void TraceView::make_index_dir() {
  if (index_dir_) return;
  std::string dir = path_ + "/index";
  if (mkdir(dir.c_str(), 0700) != 0) fail(dir);
  index_dir_ = true;
}

void TraceView::link_index(const std::string &name, const std::string &target) {
  make_index_dir();
  link("index/" + name + ".idx", target);
}

void TraceView::write(const std::string &name, const std::string &bytes) {
  std::string at = path_ + "/" + name;
  int fd = open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail(at);
  made_.push_back(at);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      fail(at);
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) fail(at);
}

void TraceView::copy_tail(const std::string &name, const std::string &source, uint64_t from) {
  std::string at = path_ + "/" + name;
  int in = open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) fail(source);
  int out = open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    close(in);
    fail(at);
  }
  made_.push_back(at);
  auto offset = static_cast<off_t>(from);
  for (;;) {
    ssize_t n = copy_file_range(in, &offset, out, nullptr, size_t{1} << 30, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP)) {
      // Older kernels, other file systems: by hand.
      char buffer[1 << 16];
      ssize_t got;
      while ((got = pread(in, buffer, sizeof buffer, offset)) > 0) {
        if (::write(out, buffer, static_cast<size_t>(got)) != got) break;
        offset += got;
      }
      n = got;
      if (n == 0) break;
    }
    if (n < 0) {
      close(in);
      close(out);
      fail(at);
    }
    if (n == 0) break;
  }
  close(in);
  if (close(out) != 0) fail(at);
}

void TraceView::write_index(const std::string &name, const std::vector<const PacketInfo *> &packets,
                            uint64_t shift, uint64_t file_size) {
  make_index_dir();
  std::string bytes;
  put_be(bytes, kIndexMagic, 4);
  put_be(bytes, 1, 4);  // version 1.1
  put_be(bytes, 1, 4);
  put_be(bytes, kIndexEntryBytes, 4);
  for (size_t i = 0; i < packets.size(); ++i) {
    const PacketInfo &p = *packets[i];
    uint64_t offset = p.offset - shift;
    uint64_t start = i == 0 ? 0 : offset;
    uint64_t end = i + 1 < packets.size() ? packets[i + 1]->offset - shift : file_size;
    put_be(bytes, offset, 8);
    put_be(bytes, (end - start) * 8, 8);
    put_be(bytes, p.content_bits, 8);
    put_be(bytes, p.ts_begin, 8);
    put_be(bytes, p.ts_end, 8);
    put_be(bytes, p.discarded, 8);
    put_be(bytes, p.class_id == kNoStreamClassId ? 0 : p.class_id, 8);
    put_be(bytes, p.instance_id, 8);
    put_be(bytes, p.seq, 8);
  }
  write("index/" + name + ".idx", bytes);
}

std::vector<std::string> TraceView::listing() const {
  std::vector<std::string> names;
  DIR *dir = opendir(path_.c_str());
  if (dir == nullptr) return names;
  while (const dirent *entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "metadata" || name == "index" || name.empty() || name[0] == '.') continue;
    names.push_back(name);
  }
  closedir(dir);
  return names;
}

}  // namespace pinsight_reader
