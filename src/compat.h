// Every CPython-version #if of the extension lives here.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030C0000
#define PINSIGHT_HAVE_SYS_MONITORING 1
#else
#define PINSIGHT_HAVE_SYS_MONITORING 0
#endif

namespace pinsight::compat {

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
#if PY_VERSION_HEX >= 0x030D0000
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

inline int code_set_extra(PyObject *code, Py_ssize_t index, void *extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_SetExtra(code, index, extra);
#else
  return _PyCode_SetExtra(code, index, extra);
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

}  // namespace pinsight::compat
