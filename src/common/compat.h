// Every CPython-version #if of the extension lives here.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#ifndef Py_IS_TYPE  // CPython 3.8
#define Py_IS_TYPE(ob, type) (Py_TYPE(ob) == (type))
#endif

#include <cstdio>
#include <string>

// The CPython versions whose private structures (the thread state's current
// frame, the frame object's interpreter frame, the code object's extra array)
// this code was checked against: 3.8 to 3.15, with the GIL. On any other CPython the extension
// still builds and imports, reads none of those structures, and activate() refuses
// (unverified_cpython below); CMakeLists.txt warns at build time.
#define PINSIGHT_CPYTHON_VERIFIED_FIRST 0x03080000
#define PINSIGHT_CPYTHON_VERIFIED_END 0x03100000  // first version not checked
#if PY_VERSION_HEX >= PINSIGHT_CPYTHON_VERIFIED_FIRST && \
    PY_VERSION_HEX < PINSIGHT_CPYTHON_VERIFIED_END && !defined(Py_GIL_DISABLED)
#define PINSIGHT_CPYTHON_VERIFIED 1
#else
#define PINSIGHT_CPYTHON_VERIFIED 0
#endif

#if PY_VERSION_HEX >= 0x030C0000
#define PINSIGHT_HAVE_SYS_MONITORING 1
#else
#define PINSIGHT_HAVE_SYS_MONITORING 0
#endif

namespace pinsight::compat {

// Why tracing must not start on CPython `hexversion` (sys.hexversion's
// encoding), free-threaded or not; empty when the build was verified for it.
inline std::string unverified_cpython(unsigned long hexversion, bool free_threaded) {
  char version[32];
  std::snprintf(version, sizeof version, "%lu.%lu.%lu%s", (hexversion >> 24) & 0xff,
                (hexversion >> 16) & 0xff, (hexversion >> 8) & 0xff, free_threaded ? "t" : "");
  const std::string verified =
      "pinsight-python reads CPython's private frame layout and was verified on CPython 3.8 to "
      "3.15 with the GIL only";
  if (free_threaded) {
    return std::string("free-threaded CPython ") + version + " is not supported: " + verified;
  }
  if (hexversion < PINSIGHT_CPYTHON_VERIFIED_FIRST || hexversion >= PINSIGHT_CPYTHON_VERIFIED_END) {
    return std::string("CPython ") + version + " is not supported: " + verified;
  }
  return std::string();
}

#ifdef Py_GIL_DISABLED
constexpr bool kFreeThreaded = true;
#else
constexpr bool kFreeThreaded = false;
#endif

// Why gil events cannot be traced on this build; empty when they can.
inline std::string gil_events_refusal(bool free_threaded) {
  if (!free_threaded) return std::string();
  return "gil events: this CPython is free-threaded (built with Py_GIL_DISABLED): there is no GIL "
         "to wait for; trace without gil";
}

// The running thread's state, or null without raising (no GIL needed).
inline PyThreadState *thread_state() {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked();
#else
  return _PyThreadState_UncheckedGet();
#endif
}

// Identity of the frame the thread is running: distinct for every live
// activation (each level of a recursion), the same across a generator's
// resumes. At PY_START/PY_RETURN it is the callee's frame; at CALL and
// C_RETURN, the caller's.
inline const void *current_frame(PyThreadState *tstate) {
#if !PINSIGHT_CPYTHON_VERIFIED
  (void)tstate;
  return nullptr;  // never guessed: activate() refuses on this CPython
#elif PY_VERSION_HEX >= 0x030D0000
  return tstate->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
  return tstate->cframe->current_frame;
#else
  return tstate->frame;
#endif
}

inline Py_ssize_t request_code_extra_index(freefunc free_extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Eval_RequestCodeExtraIndex(free_extra);
#else
  return _PyEval_RequestCodeExtraIndex(free_extra);
#endif
}

inline int code_get_extra(PyObject *code, Py_ssize_t index, void **extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_GetExtra(code, index, extra);
#else
  return _PyCode_GetExtra(code, index, extra);
#endif
}

// Our slot of a code object's extra array, read directly (CodeExtraHead,
// below): what PyUnstable_Code_GetExtra returns, without a call into libpython
// on every event. `code` must be a code object.
inline void *code_own_extra(PyObject *code, Py_ssize_t index);

inline int code_set_extra(PyObject *code, Py_ssize_t index, void *extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_SetExtra(code, index, extra);
#else
  return _PyCode_SetExtra(code, index, extra);
#endif
}

// A code object's extra array (Include/internal/pycore_code.h, since 3.14
// Objects/codeobject.c; the same from 3.6 to 3.15). CPython sizes it for every index requested so
// far, and when the code object dies calls each registered free function on its slot, NULL
// included.
struct CodeExtraHead {
  Py_ssize_t ce_size;
  void *ce_extras[1];
};

inline void *code_own_extra(PyObject *code, Py_ssize_t index) {
#if PINSIGHT_CPYTHON_VERIFIED
  const auto *head =
      static_cast<const CodeExtraHead *>(reinterpret_cast<PyCodeObject *>(code)->co_extra);
  return head && index < head->ce_size ? head->ce_extras[index] : nullptr;
#else
  void *extra = nullptr;  // never guessed: activate() refuses on this CPython
  return code_get_extra(code, index, &extra) == 0 ? extra : nullptr;
#endif
}

// Sets our slot. An array our set creates is trimmed to end at our slot: code
// objects only we annotate then never call another co_extra user's free
// function (with NULL: a ctypes callback it has since let die crashes there,
// as CPython's test_code does). A later set of a higher slot regrows it, as
// CPython does for any array too short.
inline int code_set_own_extra(PyObject *code, Py_ssize_t index, void *extra) {
  auto *pycode = reinterpret_cast<PyCodeObject *>(code);
  const bool created = pycode->co_extra == nullptr;
  int result = code_set_extra(code, index, extra);
#if PINSIGHT_CPYTHON_VERIFIED
  if (result == 0 && created) static_cast<CodeExtraHead *>(pycode->co_extra)->ce_size = index + 1;
#else
  (void)created;  // never guessed: activate() refuses on this CPython
#endif
  return result;
}

// CPython 3.14 counts a code object with an extra array as carrying state of
// its own (_PyCode_CheckNoInternalState): such code can no longer be shared
// with another interpreter (concurrent.interpreters, InterpreterPoolExecutor)
// and fails test_code's stateless checks. There our annotations live beside the
// code objects instead, freed through a code watcher (watch_code_destruction).
inline constexpr bool kCodeExtraIsState = PY_VERSION_HEX >= 0x030E0000;

// Calls `on_destroy` (GIL held) just before any code object of the running
// interpreter is freed; false before 3.12 (no code watchers) or when every
// watcher slot is taken. Call once per process.
inline bool watch_code_destruction(void (*on_destroy)(PyObject *code)) {
#if PY_VERSION_HEX >= 0x030C0000
  static void (*hook)(PyObject *) = nullptr;
  hook = on_destroy;
  return PyCode_AddWatcher([](PyCodeEvent event, PyCodeObject *code) -> int {
           if (event == PY_CODE_EVENT_DESTROY) hook(reinterpret_cast<PyObject *>(code));
           return 0;
         }) >= 0;
#else
  (void)on_destroy;
  return false;
#endif
}

// co_qualname exists from 3.11; older versions only have co_name.
inline PyObject *code_qualname(PyCodeObject *code) {
#if PY_VERSION_HEX >= 0x030B0000
  return code->co_qualname;
#else
  return code->co_name;
#endif
}

inline bool is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

inline bool has_code_qualname() { return PY_VERSION_HEX >= 0x030B0000; }

// Line of the instruction at byte offset `offset` of `code`.
inline int code_line_at(PyCodeObject *code, int offset) { return PyCode_Addr2Line(code, offset); }

// ---- frame objects (the setprofile backend and activation) ----

// The part of CPython's frame object that leads to the interpreter frame;
// the same layout from 3.11 to 3.15 (Include/internal/pycore_frame.h).
struct FrameObjectHead {
  PyObject_HEAD PyFrameObject *f_back;
  void *f_frame;
};

// The identity the tracer keys frames on: the interpreter frame, as
// current_frame() gives it (the frame object itself before 3.11).
inline const void *frame_key(PyFrameObject *frame) {
#if !PINSIGHT_CPYTHON_VERIFIED
  return frame;  // never guessed: activate() refuses on this CPython
#elif PY_VERSION_HEX >= 0x030B0000
  return reinterpret_cast<FrameObjectHead *>(frame)->f_frame;
#else
  return frame;
#endif
}

// Borrowed: the frame keeps its code alive.
inline PyCodeObject *frame_code(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x03090000
  PyCodeObject *code = PyFrame_GetCode(frame);
  Py_DECREF(code);
  return code;
#else
  return frame->f_code;
#endif
}

// New references (or null).
inline PyFrameObject *frame_back(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x03090000
  return PyFrame_GetBack(frame);
#else
  Py_XINCREF(frame->f_back);
  return frame->f_back;
#endif
}

inline PyObject *frame_globals(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetGlobals(frame);
#else
  Py_XINCREF(frame->f_globals);
  return frame->f_globals;
#endif
}

// Types whose attributes cannot be set (3.10+); before, only static types are known
// to be fixed.
#ifdef Py_TPFLAGS_IMMUTABLETYPE
constexpr unsigned long kImmutableTypeFlag = Py_TPFLAGS_IMMUTABLETYPE;
#else
constexpr unsigned long kImmutableTypeFlag = 0;
#endif

// Byte offset of the instruction the frame last started, -1 before its first.
inline int frame_lasti(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(frame);
#elif PY_VERSION_HEX >= 0x030A0000
  return frame->f_lasti < 0 ? -1 : frame->f_lasti * static_cast<int>(sizeof(_Py_CODEUNIT));
#else
  return frame->f_lasti;
#endif
}

// Before 3.11 a frame about to run its first instruction has f_lasti -1;
// since, it sits on its RESUME 0 (checked by the caller from the bytecode).
inline bool frame_not_started(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
  (void)frame;
  return false;
#else
  return frame->f_lasti < 0;
#endif
}

// The code's bytecode as CPython's un-specialised bytes (new reference).
inline PyObject *code_bytes(PyCodeObject *code) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyCode_GetCode(code);
#else
  Py_INCREF(code->co_code);
  return code->co_code;
#endif
}

inline bool is_generator_code(PyCodeObject *code) {
  return code->co_flags &
         (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR);
}

// async def (CO_COROUTINE) or @types.coroutine (CO_ITERABLE_COROUTINE): what a
// task's step runs outermost.
inline bool is_coroutine_code(PyCodeObject *code) {
  return code->co_flags & (CO_COROUTINE | CO_ITERABLE_COROUTINE);
}

// New reference to the value of `frame`'s first argument, called `name`, or
// null (no error set). Read at the frame's start, so the argument is bound.
inline PyObject *frame_first_argument(PyFrameObject *frame, const char *name) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *value = PyFrame_GetVarString(frame, const_cast<char *>(name));
  if (!value) PyErr_Clear();
  return value;
#elif PY_VERSION_HEX >= 0x030B0000
  PyObject *locals = PyFrame_GetLocals(frame);
  if (!locals) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject *value = PyMapping_GetItemString(locals, name);
  Py_DECREF(locals);
  if (!value) PyErr_Clear();
  return value;
#else
  (void)name;
  if (frame->f_code->co_argcount < 1) return nullptr;
  PyObject *value = frame->f_localsplus[0];
  Py_XINCREF(value);
  return value;
#endif
}

inline PyInterpreterState *interpreter_of(PyThreadState *tstate) {
#if PY_VERSION_HEX >= 0x03090000
  return PyThreadState_GetInterpreter(tstate);
#else
  return tstate->interp;
#endif
}

inline Py_tracefunc profile_function_of(PyThreadState *tstate) { return tstate->c_profilefunc; }
// The object sys.settrace() installed on `tstate` (borrowed), or null.
inline PyObject *trace_object_of(PyThreadState *tstate) { return tstate->c_traceobj; }

// CPython 3.12-3.15 deliver a sys.settrace debugger's first stop one line late
// while another sys.monitoring tool monitors function events (any such tool,
// tests/two_tools_probe): the sys.monitoring backend steps aside for bdb.
inline constexpr bool kDebuggerNeedsStepAside = PY_VERSION_HEX >= 0x030C0000;

// Whether a state read from the head of the interpreter's thread list, without
// the list's lock, is fully made. CPython 3.11 links a new state in first and
// fills it in after (under a lock we cannot take), while a thread without the
// GIL (one entering Python through PyGILState_Ensure) may be making it; 3.8 to
// 3.10 fill it in before linking it.
inline bool thread_state_complete(PyThreadState *tstate) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
  return __atomic_load_n(&tstate->_initialized, __ATOMIC_ACQUIRE) != 0;
#else
  (void)tstate;
  return true;
#endif
}

}  // namespace pinsight::compat

// tracemalloc's public probe, by its C symbol: CPython 3.13.0's
// cpython/tracemalloc.h declares it without extern "C" (a C++ caller would
// look for a mangled name).
extern "C" int pinsight_tracemalloc_untrack(unsigned int domain,
                                            uintptr_t ptr) __asm__("PyTraceMalloc_Untrack");

namespace pinsight::compat {

// Takes an object we made out of tracemalloc's figures, which are the
// program's (a no-op when tracemalloc is off). tracemalloc traces where the
// allocation starts: before a GC object, at its GC header (two words, the
// internal PyGC_Head) and, from 3.12, the two managed dict/weakref words of
// types that have them. Its peak may still have counted the object.
inline void hide_from_tracemalloc(PyObject *object) {
  uintptr_t start = reinterpret_cast<uintptr_t>(object);
  if (PyType_IS_GC(Py_TYPE(object))) start -= 2 * sizeof(uintptr_t);
#if PY_VERSION_HEX >= 0x030C0000
  if (PyType_HasFeature(Py_TYPE(object), Py_TPFLAGS_PREHEADER)) {
    start -= 2 * sizeof(PyObject *);
  }
#endif
  pinsight_tracemalloc_untrack(0, start);
}

}  // namespace pinsight::compat

#if PY_VERSION_HEX >= 0x030D0000
// Exported, but declared only in the internal headers since 3.13.
extern "C" int _PyEval_SetProfile(PyThreadState *tstate, Py_tracefunc func, PyObject *arg);
#endif

namespace pinsight::compat {

// Sets `tstate`'s profile function (GIL held); any thread of the interpreter.
inline void set_profile(PyThreadState *tstate, Py_tracefunc func, PyObject *arg) {
#if PY_VERSION_HEX >= 0x03090000
  if (_PyEval_SetProfile(tstate, func, arg) < 0) PyErr_Clear();
#else
  // CPython 3.8's PyEval_SetProfile, for any thread.
  PyObject *old = tstate->c_profileobj;
  Py_XINCREF(arg);
  tstate->c_profilefunc = nullptr;
  tstate->c_profileobj = nullptr;
  tstate->use_tracing = tstate->c_tracefunc != nullptr;
  Py_XDECREF(old);
  tstate->c_profilefunc = func;
  tstate->c_profileobj = arg;
  tstate->use_tracing = (func != nullptr) || (tstate->c_tracefunc != nullptr);
#endif
}

}  // namespace pinsight::compat
