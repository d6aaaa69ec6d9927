// The only place that fires tracepoints. The provider's probes live in their
// own shared object, dlopen'ed by load_provider(); until then, or where
// liblttng-ust is absent, every tracepoint is a disabled branch.
#pragma once

#include <string>

#include "code_info.h"
#include "python_pinsight_lttng_ust.h"
#include "thread_state.h"

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

inline void function(bool begin, const CodeInfo &code, int python_thread_id, int transition) {
  if (begin) {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, function_begin, code.qualname.c_str(),
                         code.filename.c_str(), code.lineno,
                         reinterpret_cast<unsigned long>(code.code), python_thread_id, transition);
  } else {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, function_end, code.qualname.c_str(),
                         code.filename.c_str(), code.lineno,
                         reinterpret_cast<unsigned long>(code.code), python_thread_id, transition);
  }
}

inline void c_call(bool begin, const FrameRecord &record, int python_thread_id, int transition) {
  const CodeInfo &caller = *record.code;
  if (begin) {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, c_call_begin, caller.qualname.c_str(),
                         record.callee_name, caller.filename.c_str(), record.line,
                         reinterpret_cast<unsigned long>(caller.code), python_thread_id,
                         transition);
  } else {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, c_call_end, caller.qualname.c_str(),
                         record.callee_name, caller.filename.c_str(), record.line,
                         reinterpret_cast<unsigned long>(caller.code), python_thread_id,
                         transition);
  }
}

void process_info(int pid, int mpi_rank, int mpi_size, const std::string &hostname,
                  const std::string &argv, const std::string &python_version, const char *backend);
void thread_start(int python_thread_id, unsigned long thread_ident);
void mode_change(const char *mode, const char *reason, unsigned long generation);

}  // namespace pinsight::emitter
