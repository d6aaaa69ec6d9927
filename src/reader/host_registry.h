// Small ids for the hosts traces come from (the `hostname` of each trace's
// environment), shared by the decoding threads: processes of different hosts
// may have the same vpid, so a process is a (host, vpid) pair.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace pinsight_reader {

class HostRegistry {
 public:
  // Thread-safe; called once per event class, not per event.
  uint16_t id(const std::string &hostname);
  std::string name(uint16_t id) const;
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
};

}  // namespace pinsight_reader
