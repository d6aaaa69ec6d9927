#include "config/config_store.h"

#include <urcu/urcu-memb.h>

#include <atomic>
#include <mutex>

namespace pinsight {

namespace config_store {
namespace {
Config *current = nullptr;
std::atomic<uint64_t> next_generation{1};
std::mutex publish_mutex;

// Registration with urcu for the readers' threads; undone at thread exit.
struct ReaderRegistration {
  bool registered = false;
  ~ReaderRegistration() {
    if (registered) urcu_memb_unregister_thread();
  }
};
thread_local ReaderRegistration reader;
}  // namespace

const Config *read_lock() {
  if (!reader.registered) {
    urcu_memb_register_thread();
    reader.registered = true;
  }
  urcu_memb_read_lock();
  return rcu_dereference(current);
}

void read_unlock() { urcu_memb_read_unlock(); }

uint64_t publish(std::unique_ptr<Config> config) {
  std::lock_guard<std::mutex> lock(publish_mutex);
  uint64_t generation = next_generation.fetch_add(1);
  config->generation = generation;
  Config *old = rcu_xchg_pointer(&current, config.release());
  if (old) {
    urcu_memb_synchronize_rcu();
    delete old;
  }
  return generation;
}

void forget_thread() {
  if (reader.registered) {
    urcu_memb_unregister_thread();
    reader.registered = false;
  }
}
}  // namespace config_store

}  // namespace pinsight
