// Per-code-object state, found in O(1) through the code object's co_extra
// slot and freed by CPython when the code object dies: no hash map on the hot
// path and no table that fills up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/compat.h"
#include "config/config.h"
#include "config/lexgion.h"
#include "emit/named_code.h"
#include "tracer/pointer_map.h"

namespace pinsight {

// window_end_trigger = all: a lexgion with a cap counts in its thread's
// WindowGates (thread_state.h) once seen, and again once capped.
enum WindowGateBits : uint8_t {
  kGateSeen = 1u << 0,
  kGateCapped = 1u << 1,
};

// The rate-control state of one code object on one Python thread, with the
// events decided for that thread under config generation `generation` (its low
// 32 bits: 2^32 reloads in one process would be needed to mistake one for another).
struct ThreadLexgion {
  LexgionCounters counters;
  uint16_t events = 0;  // kEvent* bits
  // The shadow-stack record flags (RecordFlags) of a traced start under
  // `events`, worked out as they are decided rather than at every begin.
  uint8_t start_flags = 0;
  uint8_t window_gate = 0;           // WindowGateBits, under `generation`
  uint32_t generation = UINT32_MAX;  // UINT32_MAX: never decided

  // Counted in its thread's WindowGates as seen and not capped yet.
  bool uncapped_gate() const { return (window_gate & (kGateSeen | kGateCapped)) == kGateSeen; }
};

static_assert(kEventGil < (1u << 16), "ThreadLexgion::events holds every kEvent* bit");

// Why a code object's locations were disabled (CodeInfo::disabled).
enum DisabledBits : uint8_t {
  kDisabledShared = 1u << 0,     // holds for every thread: re-armed on mode change and reload
  kDisabledPerThread = 1u << 1,  // holds for the only live thread: re-armed for a new thread too
};

// What a traced begin and its end read and write of a code object's state,
// together: CodeInfo puts NamedCode's code and naming epoch right after it, in
// the same cache line (a code object's state is cold whenever the program runs
// thousands of functions, as a test suite does). Counts are kept in 32 bits
// here and carried into CodeInfo's high words.
struct CodeHotState {
  ThreadLexgion main_thread;    // python_thread_id 0, the common case, inline
  uint32_t executions_low = 0;  // every start seen, in MONITORING and TRACING
  uint32_t traced_low = 0;      // starts whose function_begin was emitted
  // Frames of this code with a record on some thread's shadow stack. A return
  // location may be disabled only when this and suspended_traced are zero
  // (see tracer.cpp).
  uint32_t open_records = 0;
  // Functions whose begins or ends say more than a call (SpecialCode): one
  // test on a begin for all of them.
  uint8_t special = 0;
  // A generator, coroutine or async generator: its instances' lifetimes are timed.
  bool generator = false;
  // A coroutine (async def, or @types.coroutine): its begin may be a task's step.
  bool coroutine = false;
  // Rate control traces every execution under `limits` (lexgion_traces_every):
  // begins skip reading them.
  bool traces_every = false;
};

// CodeHotState::special: what a code object's frames are besides calls.
enum SpecialCode : uint8_t {
  kImportLoader = 1u << 0,    // importlib._bootstrap._find_and_load: a module load
  kTaskCreator = 1u << 1,     // returns a new asyncio task (create_task, ensure_future, ...)
  kExecutorSubmit = 1u << 2,  // _WorkItem.__init__: work handed to a thread (before it queues)
  kWorkItemRun = 1u << 3,     // concurrent.futures.thread._WorkItem.run: that work, running
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
// Laid out for the callbacks: CodeHotState, then NamedCode's code and
// named_epoch, fill the first cache line; names and the slow paths' fields follow.
struct alignas(64) CodeInfo : CodeHotState, NamedCode {
  // Decision under config generation `generation` (see Tracer::decide_thread).
  uint64_t generation = UINT64_MAX;
  uint32_t executions_high = 0;  // carries of executions_low
  uint32_t traced_high = 0;      // carries of traced_low
  // Traced generator frames suspended at a yield (see open_records).
  uint32_t suspended_traced = 0;
  // Threads counting this code in their WindowGates as seen, not capped: its
  // death must uncount it there, or their windows could never end.
  uint32_t uncapped_gates = 0;
  // Our CALL is on in this code object (per-code backends, Tracer::watch_calls).
  bool calls_watched = false;
  bool module_selected = true;
  // Some location of this code returned DISABLE (kDisabled*): the locations
  // Tracer::rearm re-enables, for our tool only.
  uint8_t disabled = 0;
  // Copy: the Config it came from may be freed on reload.
  LexgionSettings limits;

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
    if (__builtin_expect(python_thread_id == 0, 1)) return main_thread;
    return other_thread(python_thread_id);
  }
  // Out of line: the map's code would fill the callbacks' cache lines.
  __attribute__((noinline)) ThreadLexgion &other_thread(int python_thread_id);
  // fn(python_thread_id, lexgion) for every thread this code was decided for.
  template <typename Fn>
  void for_each_thread(Fn &&fn) {
    fn(0, main_thread);
    if (other_threads) {
      for (auto &[python_thread_id, lex] : *other_threads) fn(python_thread_id, lex);
    }
  }
  int line_at(int offset);

  // The hot paths' counts (carried past 2^32 into the high words).
  void count_execution() {
    if (__builtin_expect(++executions_low == 0, 0)) ++executions_high;
  }
  void count_traced() {
    if (__builtin_expect(++traced_low == 0, 0)) ++traced_high;
  }
  uint64_t executions() const { return uint64_t{executions_high} << 32 | executions_low; }
  uint64_t traced() const { return uint64_t{traced_high} << 32 | traced_low; }
  void reset_counts() { executions_low = executions_high = traced_low = traced_high = 0; }
};

static_assert(sizeof(CodeHotState) + offsetof(NamedCode, named_epoch) + sizeof(uint32_t) <= 64,
              "a traced begin and end touch one cache line of CodeInfo");

namespace code_registry {

extern Py_ssize_t extra_index;  // -1 until init() (before 3.14)
// 3.14+ (compat::kCodeExtraIsState): each code object's CodeInfo, beside it.
// Open addressing: every traced begin looks its code up here.
extern PointerMap<CodeInfo *> *beside;
bool init();
inline bool initialized() { return extra_index >= 0 || beside; }
// Called (GIL held) before a CodeInfo that some record or thread's window gates
// still count is freed.
void set_forget_hook(void (*hook)(CodeInfo &));
// Called (GIL held, no exception pending) for each CodeInfo made.
void set_created_hook(void (*hook)(CodeInfo &));
// Slow path; null on failure (no exception set). `globals` (borrowed) are
// those the code runs with; null means the running frame's.
__attribute__((cold)) CodeInfo *create(PyObject *code, PyObject *globals = nullptr);
CodeInfo *first();  // the list of live CodeInfo
size_t live_count();
uint64_t created_count();

// The CodeInfo of `code` if it has one; never creates.
inline CodeInfo *find(PyObject *code) {
  if constexpr (compat::kCodeExtraIsState) {
    CodeInfo **found = beside->find(code);
    return found ? *found : nullptr;
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
