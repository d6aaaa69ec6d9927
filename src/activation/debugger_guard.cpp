#include "activation/debugger_guard.h"

#include <cstring>

#include "common/compat.h"

namespace pinsight::debugger_guard {
namespace {

Actions actions{nullptr, nullptr};
bool installed = false;
bool armed = false;
bool stepped_aside = false;
bool check_pending = false;

// The frame calling sys.settrace runs bdb's code (set_trace, set_continue, ...).
bool called_from_bdb() {
  PyFrameObject *frame = PyEval_GetFrame();  // borrowed
  if (!frame) return false;
  PyCodeObject *code = compat::frame_code(frame);  // borrowed
  Py_ssize_t size = 0;
  const char *filename = PyUnicode_AsUTF8AndSize(code->co_filename, &size);
  if (!filename) {
    PyErr_Clear();
    return false;
  }
  static constexpr char kBdb[] = "/bdb.py";
  constexpr Py_ssize_t kLength = sizeof(kBdb) - 1;
  return size >= kLength && std::memcmp(filename + size - kLength, kBdb, kLength) == 0;
}

// Some thread's trace function is a bdb.Bdb method (pdb's trace_dispatch).
bool bdb_traces_a_thread() {
  PyObject *name = PyUnicode_FromString("bdb");
  PyObject *bdb = name ? PyImport_GetModule(name) : nullptr;  // no import: sys.modules only
  Py_XDECREF(name);
  PyObject *debugger_class = bdb ? PyObject_GetAttrString(bdb, "Bdb") : nullptr;
  Py_XDECREF(bdb);
  bool found = false;
  if (debugger_class && PyType_Check(debugger_class)) {
    PyInterpreterState *interp = compat::interpreter_of(PyThreadState_Get());
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t && !found;
         t = PyThreadState_Next(t)) {
      PyObject *trace = compat::trace_object_of(t);  // borrowed
      found = trace && PyMethod_Check(trace) &&
              PyObject_TypeCheck(PyMethod_GET_SELF(trace),
                                 reinterpret_cast<PyTypeObject *>(debugger_class));
    }
  }
  Py_XDECREF(debugger_class);
  PyErr_Clear();
  return found;
}

void step_aside() {
  if (stepped_aside) return;
  stepped_aside = true;
  // Nothing is printed: the debugger's session must read as without us (its
  // own tests compare stderr). The trace says it (mode_change "debugger").
  actions.step_aside();
}

void step_back() {
  if (!stepped_aside) return;
  stepped_aside = false;
  actions.step_back();
}

// The interpreter frame that called sys.settrace last (an identity, never read).
const void *settrace_caller = nullptr;

// Still inside that sys.settrace call: the pending call may run in Python code
// it runs first (another audit hook), before the new trace function is set.
bool inside_settrace() {
  PyFrameObject *frame = PyEval_GetFrame();  // borrowed
  if (!frame || compat::frame_key(frame) == settrace_caller) return false;
  bool below = false;
  PyFrameObject *back = compat::frame_back(frame);  // new reference
  while (back && !below) {
    below = compat::frame_key(back) == settrace_caller;
    PyFrameObject *next = compat::frame_back(back);
    Py_DECREF(back);
    back = next;
  }
  Py_XDECREF(back);
  return below;
}

int recheck(void *);

void schedule_recheck() {
  if (!check_pending && Py_AddPendingCall(&recheck, nullptr) == 0) check_pending = true;
}

int recheck(void *) {
  check_pending = false;
  if (!armed) return 0;
  if (inside_settrace()) {
    schedule_recheck();
    return 0;
  }
  bool debugging = bdb_traces_a_thread();
  if (debugging) {
    step_aside();
  } else {
    step_back();
  }
  return 0;
}

int on_audit(const char *event, PyObject *, void *) {
  if (!armed || std::strcmp(event, "sys.settrace") != 0) return 0;
  if (!stepped_aside && called_from_bdb()) step_aside();
  // Decided again once the call has taken effect: a debugger may be leaving.
  PyFrameObject *caller = PyEval_GetFrame();  // borrowed
  settrace_caller = caller ? compat::frame_key(caller) : nullptr;
  schedule_recheck();
  return 0;
}

}  // namespace

void install(Actions given) {
  if (!compat::kDebuggerNeedsStepAside) return;
  actions = given;
  armed = true;
  if (installed) return;
  if (PySys_AddAuditHook(&on_audit, nullptr) == 0) {
    installed = true;
  } else {
    PyErr_Clear();  // another hook refused ours: debuggers stop late, as before
    armed = false;
  }
}

void disarm() {
  armed = false;
  stepped_aside = false;
}

}  // namespace pinsight::debugger_guard
