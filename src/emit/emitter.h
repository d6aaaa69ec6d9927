// The only place that fires tracepoints. The provider's probes live in their
// own shared object, dlopen'ed by load_provider(); until then, or where
// liblttng-ust is absent, every tracepoint is a disabled branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "python_pinsight_lttng_ust.h"
#include "tracer/code_info.h"
#include "tracer/thread_state.h"

namespace pinsight::emitter {

enum FrameTransition : int {
  kStart = 0,
  kResume = 1,
  kThrow = 2,
  kReturn = 3,
  kYield = 4,
  kUnwind = 5
};
enum CCallTransition : int { kCall = 0, kCReturn = 1, kCRaise = 2 };

// dlopen's the provider next to this module, once. False with a reason when
// LTTng-UST is unavailable.
bool load_provider(std::string *error);
bool provider_loaded();
// Whether some LTTng session records our events right now (a session that enables
// them after this call makes it true later).
bool recording();

// The payload: full (names on every event, the design's) or compact
// (integers; names once per code object and callable and naming epoch).
// Written with the GIL held (activate, reload), read by every emit.
extern bool compact_payload;
// Advanced about once a second by the control thread (advance_naming_epoch):
// a code object's or callable's names go out again with its first compact
// event after each tick, so a trace that starts late lacks names only for
// its first tick.
extern std::atomic<uint32_t> naming_epoch;
void advance_naming_epoch();

// Slow paths: write the names, remember the epoch.
void name_code(CodeInfo &code, uint32_t epoch);
void name_callable(const char *name, uint32_t epoch);

// Callables named in an epoch, by interned name (names never die). A
// collision only costs a repeated callable_info.
struct NamedCallable {
  const char *name;
  uint32_t epoch;
};
constexpr unsigned kNamedCallableBits = 10;
extern NamedCallable named_callables[1u << kNamedCallableBits];

inline void ensure_named(CodeInfo &code, uint32_t epoch) {
  if (code.named_epoch != epoch) name_code(code, epoch);
}

inline void ensure_named(const char *callee, uint32_t epoch) {
  uintptr_t hash = reinterpret_cast<uintptr_t>(callee) * UINT64_C(0x9e3779b97f4a7c15);
  const NamedCallable &slot = named_callables[hash >> (64 - kNamedCallableBits)];
  if (slot.name != callee || slot.epoch != epoch) name_callable(callee, epoch);
}

inline void function(bool begin, CodeInfo &code, int python_thread_id, int transition) {
  auto code_id = reinterpret_cast<unsigned long>(code.code);
  if (compact_payload) {
    ensure_named(code, naming_epoch.load(std::memory_order_relaxed));
    if (begin) {
      lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_function_begin, code_id,
                           python_thread_id, transition);
    } else {
      lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_function_end, code_id,
                           python_thread_id, transition);
    }
    return;
  }
  if (begin) {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, function_begin, code.qualname.c_str(),
                         code.filename.c_str(), code.lineno, code_id, python_thread_id, transition);
  } else {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, function_end, code.qualname.c_str(),
                         code.filename.c_str(), code.lineno, code_id, python_thread_id, transition);
  }
}

inline void c_call(bool begin, const FrameRecord &record, int python_thread_id, int transition) {
  CodeInfo &caller = *record.code;
  auto code_id = reinterpret_cast<unsigned long>(caller.code);
  if (compact_payload) {
    uint32_t epoch = naming_epoch.load(std::memory_order_relaxed);
    ensure_named(caller, epoch);
    ensure_named(record.callee_name, epoch);
    auto callable_id = reinterpret_cast<unsigned long>(record.callee_name);
    if (begin) {
      lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_c_call_begin, code_id, callable_id,
                           record.line, python_thread_id, transition);
    } else {
      lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_c_call_end, code_id, callable_id,
                           record.line, python_thread_id, transition);
    }
    return;
  }
  if (begin) {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, c_call_begin, caller.qualname.c_str(),
                         record.callee_name, caller.filename.c_str(), record.line, code_id,
                         python_thread_id, transition);
  } else {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, c_call_end, caller.qualname.c_str(),
                         record.callee_name, caller.filename.c_str(), record.line, code_id,
                         python_thread_id, transition);
  }
}

void process_info(int pid, int mpi_rank, int mpi_size, const std::string &hostname,
                  const std::string &argv, const std::string &python_version, const char *backend,
                  const std::string &procname);
void thread_start(int python_thread_id, unsigned long thread_ident);
void mode_change(const char *mode, const char *reason, unsigned long generation);

}  // namespace pinsight::emitter
