// Publication of the configuration. The callbacks read the current Config
// lock-free inside an RCU read-side section (liburcu, memb flavour: the signal
// flavour would take SIGUSR1, our reload signal); the publisher swaps the
// pointer (rcu_xchg_pointer), waits for readers (synchronize_rcu) and frees
// the old one.
#pragma once

#include <cstdint>
#include <memory>

#include "config/config.h"

namespace pinsight {

namespace config_store {
// The current configuration; valid until read_unlock(). Never null after
// the first publish().
const Config *read_lock();
void read_unlock();
// Publishes `config` (its generation is assigned here) and frees the
// previous one once no reader can see it. Returns the new generation.
uint64_t publish(std::unique_ptr<Config> config);
// Called when a thread that may have read the store exits.
void forget_thread();
}  // namespace config_store

}  // namespace pinsight
