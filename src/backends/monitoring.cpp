#include "backends/monitoring.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "common/py_util.h"
#include "tracer/tracer.h"

namespace pinsight {

#if PINSIGHT_HAVE_SYS_MONITORING
namespace {

PyObject *disable_object = nullptr;  // sys.monitoring.DISABLE

inline PyObject *verdict(Verdict v) {
  // None is immortal wherever sys.monitoring exists (3.12+, PEP 683): its
  // reference needs no count, and the common verdict no load of it.
  if (__builtin_expect(v == Verdict::Continue, 1)) return Py_None;
  Py_INCREF(disable_object);
  return disable_object;
}

inline const void *frame_now() { return thread_states::current_frame(); }

inline int offset_of(PyObject *offset) {
  long value = PyLong_AsLong(offset);
  if (value == -1 && PyErr_Occurred()) {
    py::clear_error();
    return 0;
  }
  return static_cast<int>(value);
}

// Callbacks never raise into the traced program: an internal failure turns
// tracing off (Tracer::internal_failure) and the program goes on. The one
// exception is the program's own: an allocation that failed in a begin or
// CALL callback is raised as MemoryError there (the frame then unwinds, with
// PY_UNWIND; the call is not made), as the program would have met it.
inline PyObject *verdict_or_memory_error(Verdict v) {
  if (py::take_memory_failure()) return PyErr_NoMemory();
  return verdict(v);
}

template <int Transition>
PyObject *on_begin(PyObject *, PyObject *const *args, Py_ssize_t) {
  try {
    return verdict_or_memory_error(Tracer::instance().on_begin(args[0], frame_now(), Transition));
  } catch (...) {
    Tracer::instance().internal_failure("out of memory in a begin callback");
    Py_RETURN_NONE;
  }
}

template <int Transition>
PyObject *on_end(PyObject *, PyObject *const *args, Py_ssize_t) {
  try {
    // args[2]: the value returned or yielded, or the exception unwinding.
    Verdict v = Tracer::instance().on_end(args[0], frame_now(), Transition, args[2]);
    py::take_memory_failure();  // an end replaces no exception of the program's
    return verdict(v);
  } catch (...) {
    Tracer::instance().internal_failure("out of memory in an end callback");
    Py_RETURN_NONE;
  }
}

PyObject *on_call(PyObject *, PyObject *const *args, Py_ssize_t) {
  try {
    return verdict_or_memory_error(Tracer::instance().on_call(
        args[0], frame_now(), [args] { return offset_of(args[1]); }, args[2]));
  } catch (...) {
    Tracer::instance().internal_failure("out of memory in a CALL callback");
    Py_RETURN_NONE;
  }
}

template <bool Raised>
PyObject *on_c_end(PyObject *, PyObject *const *args, Py_ssize_t) {
  Tracer::instance().on_c_end(frame_now(), args[2], Raised);
  Py_RETURN_NONE;
}

// CPython calls a callback through its type's vectorcall slot. A builtin
// function's (cfunction_vectorcall_FASTCALL) looks up the thread state and
// counts the C recursion depth before and after every call; our callbacks never
// recurse into Python on their hot paths, so they are objects of a type of our
// own whose slot is the callback itself.
struct CallbackObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  const char *name;
};

template <PyObject *(*Fn)(PyObject *, PyObject *const *, Py_ssize_t)>
PyObject *vectorcall_of(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *) {
  return Fn(self, args, PyVectorcall_NARGS(nargsf));
}

void callback_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);  // a heap type's instances own a reference to it
}

PyObject *callback_repr(PyObject *self) {
  return PyUnicode_FromFormat("<pinsight-python callback %s>",
                              reinterpret_cast<CallbackObject *>(self)->name);
}

PyMemberDef callback_members[] = {{"__vectorcalloffset__", Py_T_PYSSIZET,
                                   offsetof(CallbackObject, vectorcall), Py_READONLY, nullptr},
                                  {nullptr, 0, 0, 0, nullptr}};

PyType_Slot callback_slots[] = {{Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
                                {Py_tp_dealloc, reinterpret_cast<void *>(callback_dealloc)},
                                {Py_tp_repr, reinterpret_cast<void *>(callback_repr)},
                                {Py_tp_members, callback_members},
                                {0, nullptr}};

PyType_Spec callback_spec = {
    "pinsight_python._Callback", sizeof(CallbackObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    callback_slots};

PyTypeObject *callback_type = nullptr;  // made once, never freed

PyObject *new_callback(const char *name, vectorcallfunc call) {
  if (!callback_type) {
    callback_type = reinterpret_cast<PyTypeObject *>(PyType_FromSpec(&callback_spec));
    if (!callback_type) return nullptr;
  }
  CallbackObject *callback = PyObject_New(CallbackObject, callback_type);
  if (!callback) return nullptr;
  callback->vectorcall = call;
  callback->name = name;
  return reinterpret_cast<PyObject *>(callback);
}

#define PINSIGHT_CALLBACK(name, fn) name, vectorcall_of<fn>

// One row per sys.monitoring event we use (Modules/_lsprof.c style).
struct EventRow {
  const char *event;  // attribute of sys.monitoring.events
  uint32_t group;     // CPythonEvents
  const char *name;   // the callback's, in its repr
  vectorcallfunc call;
};

EventRow event_table[] = {
    {"PY_START", kCPyBegins, PINSIGHT_CALLBACK("py_start", on_begin<wire::kStart>)},
    {"PY_RESUME", kCPyBegins, PINSIGHT_CALLBACK("py_resume", on_begin<wire::kResume>)},
    {"PY_THROW", kCPyBegins, PINSIGHT_CALLBACK("py_throw", on_begin<wire::kThrow>)},
    {"PY_RETURN", kCPyEnds, PINSIGHT_CALLBACK("py_return", on_end<wire::kReturn>)},
    {"PY_YIELD", kCPyEnds, PINSIGHT_CALLBACK("py_yield", on_end<wire::kYield>)},
    {"PY_UNWIND", kCPyEnds, PINSIGHT_CALLBACK("py_unwind", on_end<wire::kUnwind>)},
    {"CALL", kCPyCalls, PINSIGHT_CALLBACK("call", on_call)},
    {"C_RETURN", kCPyCalls, PINSIGHT_CALLBACK("c_return", on_c_end<false>)},
    {"C_RAISE", kCPyCalls, PINSIGHT_CALLBACK("c_raise", on_c_end<true>)},
};
// 4 first: PInsight's own Python domain takes 3 with no fallback, and 0, 1, 2
// and 5 are conventionally the debugger's, coverage's, profilers' and optimisers'.
constexpr int kPreferredToolIds[] = {4, 3, 2, 1, 5, 0};

class MonitoringBackend final : public Backend {
 public:
  const char *name() const override { return "sys.monitoring"; }
  int tool_id() const override { return tool_id_; }

  void install() override {
    PyObject *sys_monitoring = PySys_GetObject("monitoring");  // borrowed
    if (!sys_monitoring) throw ActivationError("sys.monitoring is not available");
    monitoring_ = sys_monitoring;
    Py_INCREF(monitoring_);
    if (!disable_object) {
      disable_object = PyObject_GetAttrString(monitoring_, "DISABLE");
      if (!disable_object) throw ActivationError("sys.monitoring.DISABLE: " + py::fetch_error());
    }
    tool_id_ = take_free_tool_id();
    PyObject *events = PyObject_GetAttrString(monitoring_, "events");
    if (!events) throw ActivationError("sys.monitoring.events: " + py::fetch_error());
    for (size_t i = 0; i < std::size(event_table); ++i) {
      PyObject *bit = PyObject_GetAttrString(events, event_table[i].event);
      event_bits_[i] = bit ? PyLong_AsUnsignedLong(bit) : 0;
      Py_XDECREF(bit);
      callbacks_[i] = new_callback(event_table[i].name, event_table[i].call);
      if (!bit || !callbacks_[i]) {
        Py_DECREF(events);
        throw ActivationError(std::string("sys.monitoring.events.") + event_table[i].event + ": " +
                              py::fetch_error());
      }
      call("register_callback", "iIO", tool_id_, static_cast<unsigned>(event_bits_[i]),
           callbacks_[i]);
      if (std::strcmp(event_table[i].event, "CALL") == 0) call_bit_ = event_bits_[i];
    }
    Py_DECREF(events);
  }

  // CALL is a local event, switched on per code object (watch_calls), and
  // C_RETURN/C_RAISE follow it: CPython reports them to the tools that monitor
  // CALL at the instruction. So code that installs a setprofile profiler can
  // be left unwatched: were our CALL on there, the sys.setprofile call would
  // run instrumented and CPython would hand its c_return, without a c_call, to
  // the profiler it just installed (profile.py's "Bad return").
  bool calls_per_code() const override { return true; }

  void set_events(uint32_t groups) override {
    unsigned long mask = 0;
    for (size_t i = 0; i < std::size(event_table); ++i) {
      if ((groups & event_table[i].group) && event_table[i].group != kCPyCalls) {
        mask |= event_bits_[i];
      }
    }
    call("set_events", "ik", tool_id_, mask);
    events_ = mask;
  }

  void watch_calls(PyObject *code, bool on) override {
    call("set_local_events", "iOk", tool_id_, code, on ? call_bit_ : 0UL);
  }

  void rearm(const std::vector<RearmedCode> &codes) override {
    // DISABLE clears our tool's bit at one instruction. With our global events
    // off, switching local events of a code object to another set instruments
    // it at once without our tool; switching global events back on (and its
    // local CALL) then adds our tool to every instruction of it. Other tools'
    // bits are never touched (checked by tests/core/test_other_tools.py).
    const unsigned long toggle = event_bits_[0];  // PY_START
    call("set_events", "ik", tool_id_, 0UL);
    for (const RearmedCode &rearmed : codes) {
      call("set_local_events", "iOk", tool_id_, rearmed.code, toggle);
      call("set_local_events", "iOk", tool_id_, rearmed.code,
           rearmed.calls_watched ? call_bit_ : 0UL);
    }
    call("set_events", "ik", tool_id_, events_);
  }

  void uninstall() override {
    if (tool_id_ < 0) return;
    call("set_events", "ik", tool_id_, 0UL);
    for (size_t i = 0; i < std::size(event_table); ++i) {
      call("register_callback", "iIO", tool_id_, static_cast<unsigned>(event_bits_[i]), Py_None);
      Py_CLEAR(callbacks_[i]);
    }
    call("free_tool_id", "i", tool_id_);
    tool_id_ = -1;
  }

  ~MonitoringBackend() override {
    for (PyObject *&cb : callbacks_) Py_CLEAR(cb);
    Py_CLEAR(monitoring_);
  }

 private:
  template <typename... Args>
  void call(const char *method, const char *format, Args... args) {
    PyObject *result = format ? PyObject_CallMethod(monitoring_, method, format, args...)
                              : PyObject_CallMethod(monitoring_, method, nullptr);
    if (!result)
      throw ActivationError(std::string("sys.monitoring.") + method + ": " + py::fetch_error());
    Py_DECREF(result);
  }

  // Never evicts another tool (debugger, coverage, profiler).
  int take_free_tool_id() {
    std::string taken;
    for (int id : kPreferredToolIds) {
      PyObject *owner = PyObject_CallMethod(monitoring_, "get_tool", "i", id);
      if (!owner) throw ActivationError("sys.monitoring.get_tool: " + py::fetch_error());
      bool free = owner == Py_None;
      if (!free) {
        PyObject *text = PyObject_Str(owner);
        const char *utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
        taken += std::string(taken.empty() ? "" : ", ") + std::to_string(id) + ": " +
                 (utf8 ? utf8 : "?");
        Py_XDECREF(text);
        py::clear_error();
      }
      Py_DECREF(owner);
      if (free) {
        call("use_tool_id", "is", id, "pinsight-python");
        return id;
      }
    }
    throw ActivationError("no free sys.monitoring tool id: all six are taken (" + taken + ")");
  }

  PyObject *monitoring_ = nullptr;
  int tool_id_ = -1;
  unsigned long events_ = 0;    // our global events (set_events)
  unsigned long call_bit_ = 0;  // sys.monitoring.events.CALL, set per code object
  unsigned long event_bits_[std::size(event_table)] = {};
  PyObject *callbacks_[std::size(event_table)] = {};
};

}  // namespace

std::unique_ptr<Backend> make_monitoring_backend() { return std::make_unique<MonitoringBackend>(); }

#else

std::unique_ptr<Backend> make_monitoring_backend() {
  throw ActivationError("sys.monitoring needs CPython 3.12 or newer; use backend='setprofile'");
}

#endif

}  // namespace pinsight
