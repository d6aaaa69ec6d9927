#include "activation/introspection.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "activation/control_thread.h"
#include "common/compat.h"
#include "emit/emitter.h"
#include "tracer/tracer.h"

extern char **environ;

namespace pinsight::introspection {
namespace {

// Written by request() under the GIL; the job reads it under the GIL too.
struct Pending {
  WindowEndAction action;
  std::string config_path;
  void (*window_started)() = nullptr;
};
// Never destroyed: the control thread may still read it while the process exits.
Pending &pending = *new Pending();
// Scripts started and not reaped yet (the control thread's).
std::vector<pid_t> &scripts = *new std::vector<pid_t>();

// hand_over_gil's wait: the job holds the GIL, or will never take it. Never
// destroyed, and made anew in a forked child (after_fork_child).
std::mutex *handover_mutex = new std::mutex();
std::condition_variable *handover_done = new std::condition_variable();
bool job_started = false;

void tell_job_started() {
  {
    std::lock_guard<std::mutex> lock(*handover_mutex);
    job_started = true;
  }
  handover_done->notify_all();
}

// What the script's environment leaves out: a preloaded library or an OpenMP
// tool would start again in bash and in what it runs (PInsight strips these
// two), and our switch would trace the script's own Python.
bool passed_to_script(const char *entry) {
  static constexpr const char *kLeftOut[] = {
      "LD_PRELOAD=", "OMP_TOOL_LIBRARIES=", "PINSIGHT_PYTHON="};
  for (const char *prefix : kLeftOut) {
    if (std::strncmp(entry, prefix, std::strlen(prefix)) == 0) return false;
  }
  return true;
}

// The script's first argument, where the trace is (set_trace_dir). Written at
// activation under the GIL; the job reads it under the GIL too.
std::string &trace_dir = *new std::string();

// By pid only: the program's own children stay the program's to wait for.
void reap_scripts() {
  std::vector<pid_t> running;
  for (pid_t pid : scripts) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == 0) running.push_back(pid);
  }
  scripts.swap(running);
}

void start_script(const std::string &script, const std::string &config_path) {
  if (script.empty()) return;
  std::string args[] = {"bash", script, trace_dir, std::to_string(getpid()), config_path};
  std::vector<char *> argv;
  for (std::string &arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char *> envp;
  for (char **entry = environ; entry && *entry; ++entry) {
    if (passed_to_script(*entry)) envp.push_back(*entry);
  }
  envp.push_back(nullptr);
  pid_t child = 0;
  // posix_spawn, not fork: no lock of another thread's is inherited.
  const int error = posix_spawn(&child, "/bin/bash", nullptr, nullptr, argv.data(), envp.data());
  if (error != 0) {
    std::fprintf(stderr, "pinsight-python: INTROSPECT: cannot start /bin/bash %s: %s\n",
                 script.c_str(), std::strerror(error));
    return;
  }
  scripts.push_back(child);
}

// The control thread's job (GIL not held).
void run() {
  reap_scripts();
  if (compat::is_finalizing()) {
    tell_job_started();
    return;
  }
  control::ScopedGil gil;
  tell_job_started();
  Tracer &tracer = Tracer::instance();
  if (!tracer.active() || !tracer.introspecting()) return;
  const WindowEndAction action = pending.action;
  // The batched payload's pending records first: the script reads them.
  if (emitter::payload() == Payload::Batched) emitter::flush_blocks(/*last=*/false);
  emitter::mode_change(trace_mode_name(tracer.mode()), "introspect_pause", tracer.generation());
  // Under the GIL: the program changes its environment under it.
  start_script(action.introspect_script, pending.config_path);
  if (action.introspect_pause_s < 0) {
    // Without this line a paused program looks hung.
    std::fprintf(stderr, "pinsight-python: INTROSPECT: paused until SIGUSR1 (kill -USR1 %d)\n",
                 static_cast<int>(getpid()));
  }
  // The GIL held meanwhile is the pause: no Python code runs.
  if (action.introspect_pause_s != 0) control::wait_for_signal(action.introspect_pause_s);
  tracer.end_introspection(action);
  if (action.has_python_mode && action.python_mode == TraceMode::Tracing &&
      pending.window_started) {
    pending.window_started();
  }
}

}  // namespace

void request(const WindowEndAction &action, const std::string &config_path,
             void (*window_started)()) {
  pending.action = action;
  pending.config_path = config_path;
  pending.window_started = window_started;
  {
    std::lock_guard<std::mutex> lock(*handover_mutex);
    job_started = false;
  }
  control::run_soon(&run);
}

void set_trace_dir(const std::string &dir) { trace_dir = dir; }

void after_fork_child() {
  // Another thread may have held the lock at the fork; the old ones are left.
  handover_mutex = new std::mutex();
  handover_done = new std::condition_variable();
  job_started = false;
}

void hand_over_gil() {
  if (control::on_control_thread() || compat::is_finalizing()) return;
  // Bounded: a control thread that is not there (a forked child's) never
  // holds up the program.
  constexpr auto kLongestWait = std::chrono::milliseconds(200);
  Py_BEGIN_ALLOW_THREADS {
    std::unique_lock<std::mutex> lock(*handover_mutex);
    handover_done->wait_for(lock, kLongestWait, [] { return job_started; });
  }
  Py_END_ALLOW_THREADS
}

}  // namespace pinsight::introspection
