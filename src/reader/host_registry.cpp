#include "host_registry.h"

#include <algorithm>

namespace pinsight_reader {

uint16_t HostRegistry::id(const std::string &hostname) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find(names_.begin(), names_.end(), hostname);
  if (it != names_.end()) return static_cast<uint16_t>(it - names_.begin());
  names_.push_back(hostname);
  return static_cast<uint16_t>(names_.size() - 1);
}

std::string HostRegistry::name(uint16_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return id < names_.size() ? names_[id] : std::string();
}

size_t HostRegistry::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return names_.size();
}

}  // namespace pinsight_reader
