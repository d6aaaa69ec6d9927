// Config::Impl: what the parser builds behind a Config and its queries read
// (internal to src/config/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"

namespace pinsight {

namespace config_detail {
// Bit set on a per-thread mask when the thread is traced at all.
constexpr uint32_t kAdmitted = 1u << 31;
// Threads beyond this get their mask computed on each call rather than looked up.
constexpr int kThreadTableLimit = 1024;
}  // namespace config_detail

struct Config::Impl {
  LexgionSettings global_default;  // [Lexgion.default]
  LexgionSettings python_default;  // [Lexgion(Python).default], else a copy of the above
  std::vector<NamedLexgion> named;
  std::unordered_map<std::string, std::vector<size_t>> named_by_qualname;
  std::vector<ThreadSection> thread_sections;

  // The per-thread part of events_for: config_detail::kAdmitted | mask, by python_thread_id.
  ThreadSet scope;
  uint32_t domain_events = kEventAll;
  std::vector<uint32_t> thread_table;
  bool beyond_table_constant = true;
  uint32_t beyond_table = 0;

  uint32_t compute_thread_slot(int python_thread_id) const {
    if (!scope.contains(python_thread_id)) return 0;
    if (thread_sections.empty()) return config_detail::kAdmitted | domain_events;
    // The last section listing the thread decides, as later lines override.
    for (auto it = thread_sections.rbegin(); it != thread_sections.rend(); ++it) {
      if (it->threads.contains(python_thread_id)) return config_detail::kAdmitted | it->events;
    }
    return 0;  // [Python.thread(...)] sections list the threads that are traced
  }

  uint32_t thread_slot(int python_thread_id) const {
    if (python_thread_id >= 0 && static_cast<size_t>(python_thread_id) < thread_table.size()) {
      return thread_table[python_thread_id];
    }
    if (python_thread_id >= 0 && beyond_table_constant) return beyond_table;
    return compute_thread_slot(python_thread_id);
  }

  void build_thread_table() {
    int64_t bound = 0;  // one past the largest finite thread id mentioned
    const auto note = [&bound](const ThreadSet &set) {
      if (!set.everything && !set.ranges.empty()) {
        bound = std::max<int64_t>(bound, int64_t{set.ranges.back().second} + 1);
      }
    };
    note(scope);
    for (const ThreadSection &section : thread_sections) note(section.threads);
    const int64_t size =
        std::min<int64_t>(std::max<int64_t>(bound, 1), config_detail::kThreadTableLimit);
    thread_table.resize(size);
    for (int id = 0; id < size; ++id) thread_table[id] = compute_thread_slot(id);
    beyond_table_constant = bound <= size;
    beyond_table = beyond_table_constant ? compute_thread_slot(static_cast<int>(size)) : 0;
  }
};

}  // namespace pinsight
