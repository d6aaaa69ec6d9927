// The tracepoint definitions live here (one translation unit); the probes in
// the provider object.
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_PROBE_DYNAMIC_LINKAGE
#include "emit/emitter.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "emit/cycle_clock.h"
#include "emit/event_text.h"

namespace pinsight::emitter {
namespace {

const char kProviderFile[] = "libpython_pinsight_lttng_ust.so";

std::once_flag load_once;
void *provider_handle = nullptr;
std::string load_error;
// The forking thread's signal mask, saved by LTTng-UST's before-fork hook and
// restored after: per thread, as two threads may fork at once.
thread_local sigset_t fork_sigset;

using ForkHook = void (*)(sigset_t *);
ForkHook hook_before_fork = nullptr;
ForkHook hook_after_fork_parent = nullptr;
ForkHook hook_after_fork_child = nullptr;

// liblttng-ust's fork hooks (ust-fork.h), run by fork() itself.
void before_fork() {
  // The forking thread's records go out in the parent; the child starts its own.
  if (batched_payload) blocks::flush_current();
  hook_before_fork(&fork_sigset);
}
void after_fork_parent() { hook_after_fork_parent(&fork_sigset); }
void after_fork_child() {
  write_guard::after_fork_child();
  hook_after_fork_child(&fork_sigset);
  blocks::forked_child();
}

std::string module_directory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&module_directory), &info) == 0 || !info.dli_fname) {
    return std::string();
  }
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// LTTng-UST's descriptors above the program's usual range: a program (CPython's
// subprocess tests, a daemon's self-check) that numbers its own descriptors and
// lists those of a child or of itself must not find ours among its small numbers.
// The lowest free descriptors are taken while LTTng-UST starts (its constructor
// registers with the session daemon and receives its buffers), then given back.
constexpr int kFirstLttngDescriptor = 64;

struct LowDescriptorsTaken {
  std::vector<int> taken;
  LowDescriptorsTaken() {
    // Where descriptors are scarce, LTTng-UST needs them more than a number.
    rlimit limit = {};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < 4 * kFirstLttngDescriptor) {
      return;
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) return;
    taken.push_back(null);
    while (taken.back() < kFirstLttngDescriptor) {
      int fd = fcntl(null, F_DUPFD_CLOEXEC, 0);  // the lowest free one
      if (fd < 0) break;
      taken.push_back(fd);
    }
  }
  ~LowDescriptorsTaken() {
    for (int fd : taken) close(fd);
  }
};

void load() {
  std::string path = module_directory() + "/" + kProviderFile;
  // Never dlclose'd: tracepoints may fire until the process ends.
  {
    LowDescriptorsTaken low;
    provider_handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
  if (!provider_handle) {
    const char *why = dlerror();
    load_error = std::string("LTTng-UST is unavailable: cannot load ") + path + ": " +
                 (why ? why : "unknown error");
    return;
  }
  hook_before_fork = reinterpret_cast<ForkHook>(dlsym(provider_handle, "lttng_ust_before_fork"));
  hook_after_fork_parent =
      reinterpret_cast<ForkHook>(dlsym(provider_handle, "lttng_ust_after_fork_parent"));
  hook_after_fork_child =
      reinterpret_cast<ForkHook>(dlsym(provider_handle, "lttng_ust_after_fork_child"));
  // LTTng-UST must hear of a fork before any code runs in the child: Python's
  // own after-fork hooks (threading, random, logging) run Python functions
  // before ours, and their events would carry the parent's cached vpid/vtid
  // into the parent's buffers. pthread_atfork runs inside fork() itself, as
  // liblttng-ust-fork.so's wrapper does, and also covers forks made by C code.
  // This process writes events from now on: no kill may cut one in half.
  write_guard::install();
  if (hook_before_fork && hook_after_fork_parent && hook_after_fork_child) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  }
}

}  // namespace

bool load_provider(std::string *error) {
  std::call_once(load_once, load);
  if (!provider_handle && error) *error = load_error;
  return provider_handle != nullptr;
}

bool provider_loaded() { return provider_handle != nullptr; }

bool compact_payload = false;
bool batched_payload = false;
bool batched_counted = false;
std::atomic<uint32_t> naming_epoch{1};
NamedCallable named_callables[1u << kNamedCallableBits];

void flush_blocks(bool last) { blocks::flush_all(last); }

void after_fork_in_python() {
  if (batched_payload) blocks::start_writer();
}

int block_writer_tid() { return blocks::writer_tid(); }

void set_payload(Payload payload) {
  bool compact = payload != Payload::Full;
  bool batched = payload == Payload::Batched;
  if (compact_payload == compact && batched_payload == batched) return;
  // Records written so far go out before events of the other payload.
  if (batched_payload && !batched) blocks::stop_writer();
  if (batched_payload) flush_blocks(/*last=*/!batched);
  if (batched) {
    blocks::enable();
    blocks::start_writer();
  }
  batched_payload = batched;
  compact_payload = compact;
  batched_counted = batched && cycle_clock::use_counter;  // enable() calibrated it
  // Names written under the other payload may be far back: write them again.
  advance_naming_epoch();
}

Payload payload() {
  return batched_payload ? Payload::Batched : compact_payload ? Payload::Compact : Payload::Full;
}

void set_idle_flush(bool wanted) { blocks::set_idle_flush(wanted); }

void allow_cycle_clock(bool allowed) { cycle_clock::allowed = allowed; }

void allow_block_writer(bool allowed) {
  blocks::writer_allowed = allowed;
  if (!batched_payload) return;
  if (allowed) {
    blocks::start_writer();
  } else {
    blocks::stop_writer();
  }
}

void advance_naming_epoch() {
  // 0 is the epoch of a code object never named: skip it on wrap-around.
  uint32_t next = naming_epoch.load(std::memory_order_relaxed) + 1;
  naming_epoch.store(next == 0 ? 1 : next, std::memory_order_relaxed);
}

void name_code(NamedCode &code, uint32_t epoch) {
  code.named_epoch = epoch;
  PINSIGHT_TRACEPOINT(code_info, reinterpret_cast<unsigned long>(code.code),
                      code.names.event_qualname(), code.names.event_filename(), code.lineno);
}

void name_callable(const char *name, uint32_t epoch) {
  uintptr_t hash = reinterpret_cast<uintptr_t>(name) * UINT64_C(0x9e3779b97f4a7c15);
  named_callables[hash >> (64 - kNamedCallableBits)] = {name, epoch};
  if (batched_payload) blocks::note_callable(name);
  PINSIGHT_TRACEPOINT(callable_info, reinterpret_cast<unsigned long>(name), name);
}

bool recording() {
  // A tracepoint is enabled once a session's enabler matches it: the application
  // has its sessions' enablers when liblttng-ust's constructor returns (it waits
  // for the session daemon's registration), so this holds from activation on.
  return provider_handle != nullptr &&
         (lttng_ust_tracepoint_enabled(python_pinsight_lttng_ust, function_begin) ||
          lttng_ust_tracepoint_enabled(python_pinsight_lttng_ust, c_call_begin) ||
          lttng_ust_tracepoint_enabled(python_pinsight_lttng_ust, process_info));
}

namespace {

// process_info's argv (a `python -c` program's is its whole code), cut to at
// most kArgvBytes: with it the process's MPI rank and command would be lost.
constexpr size_t kArgvBytes = 2048;

}  // namespace

std::string process_info_argv(const std::string &argv) {
  return event_text::cut_tail(argv, kArgvBytes);
}

void process_info_ready(int pid, int mpi_rank, int mpi_size, const char *hostname, const char *argv,
                        const char *python_version, const char *backend, const char *procname) {
  PINSIGHT_TRACEPOINT(process_info, pid, mpi_rank, mpi_size, hostname, argv, python_version,
                      backend, procname);
}

void process_info(int pid, int mpi_rank, int mpi_size, const std::string &hostname,
                  const std::string &argv, const std::string &python_version, const char *backend,
                  const std::string &procname) {
  const std::string command = process_info_argv(argv);
  process_info_ready(pid, mpi_rank, mpi_size, hostname.c_str(), command.c_str(),
                     python_version.c_str(), backend, procname.c_str());
}

// open_frame's callee for a Python function's frame. Never an empty string:
// Babeltrace 2.0.4 (Debian 12's) reads one as the same field's previous value.
constexpr const char *kPythonFrame = "-";

void open_frame(uint32_t dump_id, int tid, int python_thread_id, uint32_t depth,
                const NamedCode &code, const char *callee, int line, uint64_t begin_ns) {
  PINSIGHT_TRACEPOINT(open_frame, dump_id, tid, python_thread_id, depth,
                      reinterpret_cast<unsigned long>(code.code), code.names.event_qualname(),
                      code.names.event_filename(), line, callee ? callee : kPythonFrame, begin_ns);
}

void code_info_again(const NamedCode &code) {
  PINSIGHT_TRACEPOINT(code_info, reinterpret_cast<unsigned long>(code.code),
                      code.names.event_qualname(), code.names.event_filename(), code.lineno);
}

void callable_names_since(uint32_t since) {
  for (const NamedCallable &slot : named_callables) {
    if (slot.name != nullptr && slot.epoch - since < (1u << 31)) {
      PINSIGHT_TRACEPOINT(callable_info, reinterpret_cast<unsigned long>(slot.name), slot.name);
    }
  }
}

void dump_marker(uint32_t dump_id, const char *reason, uint32_t threads, uint32_t frames,
                 int status) {
  PINSIGHT_TRACEPOINT(dump_marker, dump_id, reason, threads, frames, status);
}

void thread_start(int python_thread_id, unsigned long thread_ident) {
  PINSIGHT_TRACEPOINT(thread_start, python_thread_id, thread_ident);
}

void generator_end(NamedCode &code, int python_thread_id, uint64_t lifetime_ns, uint32_t segments,
                   int how) {
  auto code_id = reinterpret_cast<unsigned long>(code.code);
  ensure_named(code, naming_epoch.load(std::memory_order_relaxed));
  if (batched_payload && python_thread_id >= 0) {
    // A record among the thread's others: an LTTng event of its own cost about
    // 300 ns (the context's strings, reserve and commit) per generator instance.
    blocks::append(PINSIGHT_RECORD_GENERATOR_END, how, code_id, lifetime_ns,
                   static_cast<int>(segments), python_thread_id);
    return;
  }
  // code_info names the file; the full payload keeps the qualname, as its frames do.
  PINSIGHT_TRACEPOINT(generator_end, compact_payload ? "" : code.names.event_qualname(), "",
                      code.lineno, code_id, python_thread_id, lifetime_ns, segments, how);
}

void task_create(uintptr_t task_id, int python_thread_id, const char *name) {
  std::string cut;
  PINSIGHT_TRACEPOINT(task_create, static_cast<unsigned long>(task_id), python_thread_id,
                      event_text::bounded(name, cut));
}

void task_name(uintptr_t task_id, int python_thread_id, const char *name) {
  std::string cut;
  PINSIGHT_TRACEPOINT(task_name, static_cast<unsigned long>(task_id), python_thread_id,
                      event_text::bounded(name, cut));
}

void task_step(uintptr_t task_id, int python_thread_id, int transition) {
  PINSIGHT_TRACEPOINT(task_step, static_cast<unsigned long>(task_id), python_thread_id, transition);
}

void task_await(uintptr_t task_id, int python_thread_id, uintptr_t awaited_id) {
  PINSIGHT_TRACEPOINT(task_await, static_cast<unsigned long>(task_id), python_thread_id,
                      static_cast<unsigned long>(awaited_id));
}

void task_done(uintptr_t task_id, int python_thread_id, int how) {
  PINSIGHT_TRACEPOINT(task_done, static_cast<unsigned long>(task_id), python_thread_id, how);
}

void task_handoff(uintptr_t task_id, int python_thread_id, uintptr_t work_id, int transition) {
  PINSIGHT_TRACEPOINT(task_handoff, static_cast<unsigned long>(task_id), python_thread_id,
                      static_cast<unsigned long>(work_id), transition);
}

void mode_change(const char *mode, const char *reason, unsigned long generation) {
  // Records before the change come before it in the trace too; a mode that
  // writes none leaves readers nothing to wait for.
  if (batched_payload) blocks::flush_all(std::strcmp(mode, "TRACING") != 0);
  PINSIGHT_TRACEPOINT(mode_change, mode, reason, generation);
}

void config_info(const std::string &path, unsigned long generation) {
  PINSIGHT_TRACEPOINT(config_info, event_text::cut_middle(path).c_str(), generation);
}

void lexgion_counts(const NamedCode &code, uint64_t executions, uint64_t traced, int flags,
                    int64_t max_num_traces, int64_t tracing_rate, int64_t trace_starts_at,
                    const std::string &section) {
  PINSIGHT_TRACEPOINT(lexgion_counts, code.names.event_qualname(), code.names.event_filename(),
                      code.lineno, executions, traced, flags, max_num_traces, tracing_rate,
                      trace_starts_at, event_text::cut_middle(section).c_str());
}

}  // namespace pinsight::emitter
