// Per-code-object state, found in O(1) through the code object's co_extra
// slot and freed by CPython when the code object dies: no hash map on the hot
// path and no table that fills up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/compat.h"
#include "config/config.h"
#include "config/lexgion.h"
#include "emit/named_code.h"

namespace pinsight {

// The rate-control state of one code object on one Python thread, with the
// events decided for that thread under config generation `generation`.
struct ThreadLexgion {
  LexgionCounters counters;
  uint32_t events = 0;
  uint64_t generation = UINT64_MAX;
};

// Why a code object's locations were disabled (CodeInfo::disabled).
enum DisabledBits : uint8_t {
  kDisabledShared = 1u << 0,     // holds for every thread: re-armed on mode change and reload
  kDisabledPerThread = 1u << 1,  // holds for the only live thread: re-armed for a new thread too
};

// Who may hold a CodeInfo*, and why it cannot outlive its code object:
// - shadow-stack records (ThreadState::stack): only of running frames, and a
//   running frame keeps its code alive; a record left stale is neutralized by
//   the forget hook before the CodeInfo is freed (thread_states::forget_code);
// - GeneratorTable entries: each holds a weak reference to its generator, and
//   a generator keeps its code alive; the entry goes when the generator dies;
// - the live list below: unlinked by free_code_info.
// Nothing else keeps one past the callback that looked it up.
// NamedCode's `code` is borrowed: this CodeInfo dies with the code object.
// Laid out for the callbacks: a traced begin and its end read and write only
// the fields up to `limits`' rates, in the first three cache lines (a code
// object's state is cold whenever the program runs thousands of functions,
// as a test suite does); names and bookkeeping of the slow paths follow.
struct alignas(64) CodeInfo : NamedCode {
  // ---- hot: every begin and end ----
  // Decision under config generation `generation` (see Tracer::decide).
  uint64_t generation = UINT64_MAX;
  uint64_t executions = 0;  // every start seen, in MONITORING and TRACING
  uint64_t traced = 0;      // starts whose function_begin was emitted
  // Balance bookkeeping: frames of this code with a record on some thread's
  // shadow stack, and traced generator frames suspended at a yield. A return
  // location may be disabled only when both are zero (see tracer.cpp).
  uint32_t open_records = 0;
  uint32_t suspended_traced = 0;
  // importlib._bootstrap._find_and_load: its frames are module loads.
  bool import_loader = false;
  // A generator, coroutine or async generator: its instances' lifetimes are timed.
  bool generator = false;
  // Our CALL is on in this code object (per-code backends, Tracer::watch_calls).
  bool calls_watched = false;
  bool module_selected = true;
  // Some location of this code returned DISABLE (kDisabled*): the locations
  // Tracer::rearm re-enables, for our tool only.
  uint8_t disabled = 0;
  ThreadLexgion main_thread;  // python_thread_id 0, the common case, inline
  // Copy: the Config it came from may be freed on reload. Its rates come first.
  LexgionSettings limits;

  // ---- the slow paths' ----
  std::string module;  // __name__ of the globals the code first ran with
  // Names setprofile (sys.setprofile, threading's, _setprofileallthreads): code
  // that may install a profiler, whose native calls go unwatched (see
  // Backend::calls_per_code).
  bool names_setprofile = false;
  // Its begins were disabled once (rate control gave up on it): later starts
  // were not seen, and `executions` is a lower bound.
  bool begins_were_disabled = false;
  const LexgionSettings *lexgion = nullptr;  // in the Config of `generation` (RCU)
  std::unique_ptr<std::unordered_map<int, ThreadLexgion>> other_threads;
  // Begins of this code were disabled (DISABLE returned) in this epoch.
  uint64_t begins_disabled_epoch = 0;
  // Tracer's count of periods in which starts went uncounted (STANDBY, OFF,
  // a debugger's) when this CodeInfo was made: one more since, and
  // `executions` is a lower bound too.
  uint64_t blind_periods_at_creation = 0;

  // Lines of call sites, by instruction offset (c_call caller_lineno).
  std::vector<std::pair<int, int>> call_lines;

  // Every live CodeInfo, for lexgions() and resets.
  CodeInfo *prev = nullptr;
  CodeInfo *next = nullptr;

  ThreadLexgion &for_thread(int python_thread_id) {
    if (python_thread_id == 0) return main_thread;
    if (!other_threads) other_threads = std::make_unique<std::unordered_map<int, ThreadLexgion>>();
    return (*other_threads)[python_thread_id];
  }
  int line_at(int offset);
};

namespace code_registry {

extern Py_ssize_t extra_index;  // -1 until init() (before 3.14)
// 3.14+ (compat::kCodeExtraIsState): each code object's CodeInfo, beside it.
extern std::unordered_map<const PyObject *, CodeInfo *> *beside;
bool init();
inline bool initialized() { return extra_index >= 0 || beside; }
// Called (GIL held) before a CodeInfo that some record still names is freed.
void set_forget_hook(void (*hook)(CodeInfo &));
// Called (GIL held, no exception pending) for each CodeInfo made.
void set_created_hook(void (*hook)(CodeInfo &));
// Slow path; null on failure (no exception set). `globals` (borrowed) are
// those the code runs with; null means the running frame's.
CodeInfo *create(PyObject *code, PyObject *globals = nullptr);
CodeInfo *first();  // the list of live CodeInfo
size_t live_count();
uint64_t created_count();

// The CodeInfo of `code` if it has one; never creates.
inline CodeInfo *find(PyObject *code) {
  if constexpr (compat::kCodeExtraIsState) {
    auto it = beside->find(code);
    return it == beside->end() ? nullptr : it->second;
  }
  return static_cast<CodeInfo *>(compat::code_own_extra(code, extra_index));
}

// The CodeInfo of `code`, created on first sight.
inline CodeInfo *get(PyObject *code, PyObject *globals = nullptr) {
  CodeInfo *info = find(code);
  return info ? info : create(code, globals);
}

}  // namespace code_registry
}  // namespace pinsight
