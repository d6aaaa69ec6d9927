// Publication of the configuration and the control thread that reloads it.
//
// The callbacks read the current Config lock-free inside an RCU read-side
// section (liburcu, memb flavour: the signal flavour would take SIGUSR1,
// our reload signal). The control thread parses a new file, publishes it
// with rcu_assign_pointer, waits for readers (synchronize_rcu) and frees the
// old one, then takes the GIL to apply CPython-level changes.
#pragma once

#include <memory>
#include <string>

#include "config.h"

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

namespace control {
// Starts the control thread and installs the SIGUSR1 handler, once per
// process (again in a forked child). `path` is the file to re-read; empty
// means "the same lookup as at activation".
void start(const std::string &path);
void set_path(const std::string &path);
// The last thread that ran Python code is exiting: the control thread then
// looks whether the program has any thread left, and ends the process if not.
void program_thread_exiting();
// Stops the control thread (atexit, before the interpreter finalizes; detach)
// and gives SIGUSR1 back to the handler it had before start().
void stop();
// Reloads now, on the calling thread (GIL not held). For tests and the API.
bool reload_now(std::string *error);
}  // namespace control

}  // namespace pinsight
