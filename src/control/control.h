// The control thread that reloads the configuration on SIGUSR1. It parses the
// new file, publishes it in the configuration store (config_store.h), then
// takes the GIL to apply CPython-level changes.
#pragma once

#include <memory>
#include <string>

#include "common/compat.h"
#include "config/config_store.h"

namespace pinsight {

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

// Holds the GIL for its scope, on a thread that did not hold it: the control
// thread with the Python thread state it keeps (control.cpp says why), any
// other thread through PyGILState_Ensure.
class ScopedGil {
 public:
  ScopedGil();
  ~ScopedGil();
  ScopedGil(const ScopedGil &) = delete;
  ScopedGil &operator=(const ScopedGil &) = delete;

 private:
  PyThreadState *own_state_ = nullptr;
  PyGILState_STATE gilstate_{};
};
}  // namespace control

}  // namespace pinsight
