// The only place that fires tracepoints. The provider's probes live in their
// own shared object, dlopen'ed by load_provider(); until then, or where
// liblttng-ust is absent, every tracepoint is a disabled branch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/settings.h"
#include "emit/block_buffer.h"
#include "emit/event_text.h"
#include "emit/named_code.h"
#include "emit/write_guard.h"
#include "format/wire.h"
#include "python_pinsight_lttng_ust.h"

namespace pinsight::emitter {

// dlopen's the provider next to this module, once. False with a reason when
// LTTng-UST is unavailable.
bool load_provider(std::string *error);
bool provider_loaded();
// Whether some LTTng session records our events right now (a session that enables
// them after this call makes it true later).
bool recording();

// The emitter's switches. Activation owns the payload and the idle flush
// (activation, reload); flushes and the naming epoch's ticks also come from
// the control thread and the tracer (stop, fork). The emitter keeps what must
// hold when they move: records of one payload go out before events of the
// next, and names are written again after a change. Set with the GIL held.
//
// The payload (common/settings.h): full (every event names its function and
// callee; the file once per code object and naming epoch, in code_info), compact
// (integers; names once per code object and callable and naming epoch) or
// batched (compact's records and names, the records packed per thread:
// block_buffer.h).
void set_payload(Payload payload);
Payload payload();
// Whether the batched payload may time records with the CPU's cycle counter;
// decided for the process when batched is first chosen (emit/cycle_clock.h).
void allow_cycle_clock(bool allowed);
// Whether the batched payload's blocks are written by a writer thread (the
// default) or by each traced thread (emit/block_buffer.h). Applies at once.
void allow_block_writer(bool allowed);
// The batched payload's idle flush (the control thread's, of threads that
// wrote nothing for a while): wanted while batched records are written.
void set_idle_flush(bool wanted);
// Writes every thread's pending records (GIL held): a flush point of the
// batched payload (mode change, reload, deactivate). last: no record follows
// for now (blocks::flush_all's final).
void flush_blocks(bool last);
// In a forked child, from Python's after-fork hook (where a thread may be
// started): the batched payload's writer thread again (the parent's is not here).
void after_fork_in_python();
// The batched payload's writer thread's tid, 0 when none runs in this process.
int block_writer_tid();
// Advanced about once a second by the control thread (advance_naming_epoch):
// a code object's or callable's names go out again with its first event after
// each tick, so a trace that starts late lacks names (the full payload: files)
// only for its first tick.
extern std::atomic<uint32_t> naming_epoch;
void advance_naming_epoch();

// What set_payload chose, read by every emit; written by set_payload only.
// compact_payload is set under batched too.
extern bool compact_payload;
extern bool batched_payload;
// batched_payload with the cycle counter for time: the one case staged inline.
extern bool batched_counted;

// Slow paths: write the names, remember the epoch.
__attribute__((cold)) void name_code(NamedCode &code, uint32_t epoch);
__attribute__((cold)) void name_callable(const char *name, uint32_t epoch);

// Callables named in an epoch, by interned name (names never die). A
// collision only costs a repeated callable_info.
struct NamedCallable {
  const char *name;
  uint32_t epoch;
};
constexpr unsigned kNamedCallableBits = 10;
extern NamedCallable named_callables[1u << kNamedCallableBits];

// True when it wrote the names now (the first record of this epoch to need them).
inline bool ensure_named(NamedCode &code, uint32_t epoch) {
  if (__builtin_expect(code.named_epoch == epoch, 1)) return false;
  name_code(code, epoch);
  return true;
}

inline bool ensure_named(const char *callee, uint32_t epoch) {
  uintptr_t hash = reinterpret_cast<uintptr_t>(callee) * UINT64_C(0x9e3779b97f4a7c15);
  const NamedCallable &slot = named_callables[hash >> (64 - kNamedCallableBits)];
  if (__builtin_expect(slot.name == callee && slot.epoch == epoch, 1)) return false;
  name_callable(callee, epoch);
  return true;
}

// The compact and full payloads' function events (out of line: the batched
// payload's path below stays short enough to inline into the callbacks).
__attribute__((noinline)) inline void function_event(bool begin, NamedCode &code,
                                                     int python_thread_id, int transition) {
  auto code_id = reinterpret_cast<unsigned long>(code.code);
  if (compact_payload) {
    if (begin) {
      PINSIGHT_TRACEPOINT(compact_function_begin, code_id, python_thread_id, transition);
    } else {
      PINSIGHT_TRACEPOINT(compact_function_end, code_id, python_thread_id, transition);
    }
    return;
  }
  if (begin) {
    PINSIGHT_TRACEPOINT(function_begin, code.names.event_qualname(), code.lineno, code_id,
                        python_thread_id, transition);
  } else {
    PINSIGHT_TRACEPOINT(function_end, code.names.event_qualname(), code.lineno, code_id,
                        python_thread_id, transition);
  }
}

// The time of the calling thread's next batched record (cycle_clock::ticks()),
// read once by the tracer for the record and for the frame's shadow-stack
// entry: a flight recorder's dump says how long each open frame has run
// (blocks::stage_at's first step, moved before the entry is stored). 0 under
// the other payloads, whose events LTTng times: their frames keep no begin.
inline uint64_t record_ticks() {
  if (__builtin_expect(batched_counted, 1)) return cycle_clock::counter();
  return batched_payload ? cycle_clock::ticks() : 0;
}

// Every other case: the batched payload on clock_gettime, compact, full.
__attribute__((noinline)) inline void function_other(uint64_t ticks, bool begin, NamedCode &code,
                                                     int python_thread_id, int transition) {
  if (batched_payload) {
    blocks::append_function_at(
        ticks, begin ? PINSIGHT_RECORD_FUNCTION_BEGIN : PINSIGHT_RECORD_FUNCTION_END, transition,
        reinterpret_cast<uintptr_t>(code.code), python_thread_id);
    return;
  }
  function_event(begin, code, python_thread_id, transition);
}

// A frame's begin or end at `ticks` (record_ticks()).
inline void function(uint64_t ticks, bool begin, NamedCode &code, int python_thread_id,
                     int transition) {
  // Every payload names the code object's file in code_info only. A record that
  // names it takes its time again after: no reader meets a batched record before
  // its code's code_info (the frame's shadow-stack entry keeps the earlier time).
  if (ensure_named(code, naming_epoch.load(std::memory_order_relaxed))) ticks = record_ticks();
  if (__builtin_expect(batched_counted, 1)) {
    // One test for the payload and the clock: the counter was read directly.
    blocks::stage_at(
        ticks, python_thread_id, reinterpret_cast<uintptr_t>(code.code), 0,
        blocks::line_head(0, begin ? PINSIGHT_RECORD_FUNCTION_BEGIN : PINSIGHT_RECORD_FUNCTION_END,
                          transition));
    return;
  }
  function_other(ticks, begin, code, python_thread_id, transition);
}

// A native call by `caller` at line `line` of `callee` (an interned name, its
// id), at `ticks` (record_ticks()).
inline void c_call(uint64_t ticks, bool begin, NamedCode &caller, const char *callee, int line,
                   int python_thread_id, int transition) {
  auto code_id = reinterpret_cast<unsigned long>(caller.code);
  uint32_t epoch = naming_epoch.load(std::memory_order_relaxed);
  bool named_now = ensure_named(caller, epoch);
  if (compact_payload) {
    named_now |= ensure_named(callee, epoch);
    auto callable_id = reinterpret_cast<unsigned long>(callee);
    if (batched_payload) {
      if (named_now) ticks = record_ticks();  // after the names, as function()'s
      blocks::append_at(ticks, begin ? PINSIGHT_RECORD_C_CALL_BEGIN : PINSIGHT_RECORD_C_CALL_END,
                        transition, code_id, callable_id, line, python_thread_id);
      return;
    }
    if (begin) {
      PINSIGHT_TRACEPOINT(compact_c_call_begin, code_id, callable_id, line, python_thread_id,
                          transition);
    } else {
      PINSIGHT_TRACEPOINT(compact_c_call_end, code_id, callable_id, line, python_thread_id,
                          transition);
    }
    return;
  }
  if (begin) {
    PINSIGHT_TRACEPOINT(c_call_begin, caller.names.event_qualname(), callee, line, code_id,
                        python_thread_id, transition);
  } else {
    PINSIGHT_TRACEPOINT(c_call_end, caller.names.event_qualname(), callee, line, code_id,
                        python_thread_id, transition);
  }
}

// A module load (importlib's _find_and_load): import_begin, then import_end.
inline void import(bool begin, const char *module, int python_thread_id, int transition) {
  std::string cut;
  const char *name = event_text::bounded(module, cut);
  if (begin) {
    PINSIGHT_TRACEPOINT(import_begin, name, python_thread_id, transition);
  } else {
    PINSIGHT_TRACEPOINT(import_end, name, python_thread_id, transition);
  }
}

// A sampled allocation (`weight`: the bytes it stands for), and the free of one.
inline void alloc_sample(const void *address, size_t size, uint64_t weight, const char *qualname,
                         const char *filename, int lineno, unsigned long code_id,
                         int python_thread_id, int source) {
  PINSIGHT_TRACEPOINT(alloc_sample, reinterpret_cast<unsigned long>(address),
                      static_cast<unsigned long>(size), static_cast<unsigned long>(weight),
                      qualname, filename, lineno, code_id, python_thread_id, source);
}

inline void free_sample(const void *address) {
  PINSIGHT_TRACEPOINT(free_sample, reinterpret_cast<unsigned long>(address));
}

// events = gil: a hand-off seen by the thread switched in, and a released GIL taken back.
inline void gil_switch(int python_thread_id, int previous_thread_id, uint64_t wait_ns,
                       uint64_t released_ns) {
  PINSIGHT_TRACEPOINT(gil_switch, python_thread_id, previous_thread_id,
                      static_cast<unsigned long>(wait_ns), static_cast<unsigned long>(released_ns));
}

inline void gil_released(int python_thread_id, uint64_t released_ns, uint64_t wait_ns,
                         uint64_t before_ns, int source) {
  PINSIGHT_TRACEPOINT(gil_released, python_thread_id, static_cast<unsigned long>(released_ns),
                      static_cast<unsigned long>(wait_ns), static_cast<unsigned long>(before_ns),
                      source);
}
// A traced generator instance ended (rare: once per instance, out of line).
void generator_end(NamedCode &code, int python_thread_id, uint64_t lifetime_ns, uint32_t segments,
                   int how);

// asyncio tasks (tracer/tasks.h): per event in every payload, one per task
// step at most (out of line). A batched thread's records staged before go out
// first only at a flush; the reader merges them by time (block_merger).
void task_create(uintptr_t task_id, int python_thread_id, const char *name);
void task_name(uintptr_t task_id, int python_thread_id, const char *name);
void task_step(uintptr_t task_id, int python_thread_id, int transition);
void task_await(uintptr_t task_id, int python_thread_id, uintptr_t awaited_id);
void task_done(uintptr_t task_id, int python_thread_id, int how);
void task_handoff(uintptr_t task_id, int python_thread_id, uintptr_t work_id, int transition);

void process_info(int pid, int mpi_rank, int mpi_size, const std::string &hostname,
                  const std::string &argv, const std::string &python_version, const char *backend,
                  const std::string &procname);
// process_info's command line as the event carries it (cut to 2 KiB).
std::string process_info_argv(const std::string &argv);
// The same event with every text ready (async-signal-safe: a flight recorder's
// dump writes it again from a fatal signal's handler).
void process_info_ready(int pid, int mpi_rank, int mpi_size, const char *hostname, const char *argv,
                        const char *python_version, const char *backend, const char *procname);
// A flight recorder's dump (async-signal-safe): one frame open on the thread
// `tid` (`python_thread_id`) when it was taken, `depth` from its outermost. A
// Python function's frame names its function (`code`, lineno its first line);
// a native call's names its caller, `callee` and the call's line. begin_ns: when
// it began (LTTng-UST's clock), 0 when not known.
void open_frame(uint32_t dump_id, int tid, int python_thread_id, uint32_t depth,
                const NamedCode &code, const char *callee, int line, uint64_t begin_ns);
// A flight recorder's dump (async-signal-safe): the names of what ran lately
// (code_info for `code`, callable_info for every callable named since naming
// epoch `since`), written again: the ring has lost the first of them.
void code_info_again(const NamedCode &code);
void callable_names_since(uint32_t since);
// After a process's open frames (async-signal-safe): how many it wrote, and
// `status` (wire.h's PINSIGHT_DUMP_*) what it could not.
void dump_marker(uint32_t dump_id, const char *reason, uint32_t threads, uint32_t frames,
                 int status);
void thread_start(int python_thread_id, unsigned long thread_ident);
void mode_change(const char *mode, const char *reason, unsigned long generation);
void config_info(const std::string &path, unsigned long generation);
// Rate control's counts of one code object (lexgion_counts; flags: kLexgionLowerBound).
inline constexpr int kLexgionLowerBound = 1;
void lexgion_counts(const NamedCode &code, uint64_t executions, uint64_t traced, int flags,
                    int64_t max_num_traces, int64_t tracing_rate, int64_t trace_starts_at,
                    const std::string &section);

}  // namespace pinsight::emitter
