#include "backends/profile_hook.h"

#include <iterator>
#include <string>
#include <string_view>

#include "backends/monitoring.h"
#include "common/py_util.h"
#include "tracer/tracer.h"

namespace pinsight {
namespace {

// Opcodes, read from CPython's `opcode` module at install: numbers differ
// between versions, names do not.
struct Opcodes {
  int resume = -1;       // 3.11+: RESUME 0 starts a frame, RESUME n>0 resumes it
  int yield_value = -1;  // 3.11, 3.12: a frame resumed here with an exception (throw)
  int return_value = -1;
  int return_const = -1;  // 3.12+
};
Opcodes opcodes;

// CPythonEvents the tracer wants; read on every event (GIL held).
uint32_t wanted_groups = 0;

// _thread's thread starters: the new thread's state exists when they return,
// before the thread runs any Python code, and gets the profile function then.
PyObject *thread_starters[2] = {nullptr, nullptr};

int profile(PyObject *, PyFrameObject *frame, int what, PyObject *arg);

// Threads without a profile function get ours (GIL held). A thread with
// another profiler keeps it.
void hook_threads() {
  PyInterpreterState *interp = compat::interpreter_of(PyThreadState_Get());
  for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
    if (!compat::profile_function_of(t)) compat::set_profile(t, profile, nullptr);
  }
}

// The thread _thread just created: its state is the newest, at the head of the
// interpreter's list, and it cannot run before we return (we hold the GIL).
// Only that one is touched: walking the whole list on every thread start
// crashed on 3.11 (test_threading's fork tests, 1 run in 4) on a state that
// another thread was tearing down. Our control thread keeps one state for its
// life (activation/control_thread.cpp), so only a native thread entering Python at this very
// moment can put its state in front; a half-made one is left alone.
void hook_new_thread() {
  PyInterpreterState *interp = compat::interpreter_of(PyThreadState_Get());
  PyThreadState *newest = PyInterpreterState_ThreadHead(interp);
  if (newest && compat::thread_state_complete(newest) && !compat::profile_function_of(newest)) {
    compat::set_profile(newest, profile, nullptr);
  }
}

// The opcode and argument at byte offset `lasti` of `code`, or -1.
inline int opcode_at(PyCodeObject *code, int lasti, int *oparg) {
  if (lasti < 0) return -1;
  PyObject *bytes = compat::code_bytes(code);
  int op = -1;
  if (bytes && lasti + 1 < PyBytes_GET_SIZE(bytes)) {
    auto *raw = reinterpret_cast<const unsigned char *>(PyBytes_AS_STRING(bytes));
    op = raw[lasti];
    *oparg = raw[lasti + 1];
  }
  Py_XDECREF(bytes);
  return op;
}

bool take_pending_throw(ThreadState &state, const void *frame) {
  auto &pending = state.pending_throws;
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
    if (it->second == frame) {
      pending.erase(std::next(it).base());
      return true;
    }
  }
  return false;
}

// PyTrace_CALL fires for a start, a resume and a throw alike; the frame
// tells which (see frame_not_started and Opcodes).
inline int begin_transition(PyFrameObject *frame, PyCodeObject *code, const void *key) {
  if (!compat::is_generator_code(code) || compat::frame_not_started(frame)) {
    return wire::kStart;
  }
  int oparg = 0;
  int op = opcode_at(code, compat::frame_lasti(frame), &oparg);
  if (op == opcodes.resume && (oparg & 3) == 0) return wire::kStart;
  if (op == opcodes.yield_value) return wire::kThrow;
  ThreadState *state = thread_states::current_ptr;
  if (state && !state->pending_throws.empty() && take_pending_throw(*state, key)) {
    return wire::kThrow;
  }
  return wire::kResume;
}

// PyTrace_RETURN fires for a return, a yield (value) and an unwind (null).
inline int end_transition(PyFrameObject *frame, PyCodeObject *code, PyObject *arg) {
  if (!arg) return wire::kUnwind;
  if (!compat::is_generator_code(code)) return wire::kReturn;
  int oparg = 0;
  int op = opcode_at(code, compat::frame_lasti(frame), &oparg);
  return op == opcodes.return_value || op == opcodes.return_const ? wire::kReturn : wire::kYield;
}

// gen.throw()/close() resumes the generator, and each generator it
// delegates to (yield from, await), with an exception: remember their
// frames so their PyTrace_CALL reads as a throw.
void note_throw(ThreadState &state, PyObject *callable) {
  auto *fn = reinterpret_cast<PyCFunctionObject *>(callable);
  PyObject *self = fn->m_self;
  if (!self || !(PyGen_CheckExact(self) || PyCoro_CheckExact(self))) return;
  const char *name = fn->m_ml->ml_name;
  if (std::string_view(name) != "throw" && std::string_view(name) != "close") return;
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  PyObject *gen = self;
  Py_INCREF(gen);
  for (int depth = 0; gen && depth < 1000; ++depth) {
    bool coro = PyCoro_CheckExact(gen);
    if (!coro && !PyGen_CheckExact(gen)) break;
    PyObject *frame = py::attribute_or_null(gen, coro ? "cr_frame" : "gi_frame");
    if (frame && PyFrame_Check(frame)) {
      state.pending_throws.emplace_back(
          self, compat::frame_key(reinterpret_cast<PyFrameObject *>(frame)));
    }
    Py_XDECREF(frame);
    PyObject *next = py::attribute_or_null(gen, coro ? "cr_await" : "gi_yieldfrom");
    Py_DECREF(gen);
    gen = next;
  }
  Py_XDECREF(gen);
  PyErr_Restore(exc_type, exc_value, exc_tb);
}

// Keyed by the generator thrown into (the method's self), not by the method
// object: on 3.12+ CPython's profile hook passes a new bound method for each
// event of one call.
void forget_throw(ThreadState &state, PyObject *callable) {
  if (!PyCFunction_Check(callable)) return;
  const void *generator = reinterpret_cast<PyCFunctionObject *>(callable)->m_self;
  auto &pending = state.pending_throws;
  for (size_t i = pending.size(); i-- > 0;) {
    if (pending[i].first == generator) pending.erase(pending.begin() + static_cast<long>(i));
  }
}

// The profile function: it raises into the program only the program's own
// MemoryError (below).
int profile(PyObject *, PyFrameObject *frame, int what, PyObject *arg) {
  try {
    Tracer &tracer = Tracer::instance();
    switch (what) {
      case PyTrace_CALL:
        if (wanted_groups & kCPyBegins) {
          PyCodeObject *code = compat::frame_code(frame);
          const void *key = compat::frame_key(frame);
          tracer.on_begin(reinterpret_cast<PyObject *>(code), key,
                          begin_transition(frame, code, key));
        }
        break;
      case PyTrace_RETURN:
        if (wanted_groups & kCPyEnds) {
          PyCodeObject *code = compat::frame_code(frame);
          // arg: the value returned or yielded; null when unwinding (the
          // exception is hidden from profile functions).
          tracer.on_end(reinterpret_cast<PyObject *>(code), compat::frame_key(frame),
                        end_transition(frame, code, arg), arg);
        }
        break;
      case PyTrace_C_CALL:
        if (wanted_groups & kCPyCalls) {
          if (PyCFunction_Check(arg) && PyCFunction_GET_SELF(arg)) {
            if (ThreadState *state = thread_states::current_ptr) note_throw(*state, arg);
          }
          tracer.on_call(
              reinterpret_cast<PyObject *>(compat::frame_code(frame)), compat::frame_key(frame),
              [frame] { return compat::frame_lasti(frame); }, arg);
        }
        break;
      case PyTrace_C_RETURN:
      case PyTrace_C_EXCEPTION:
        if ((arg == thread_starters[0] || arg == thread_starters[1]) && wanted_groups &&
            what == PyTrace_C_RETURN) {
          hook_new_thread();
        }
        if (wanted_groups & kCPyCalls) {
          ThreadState *state = thread_states::current_ptr;
          if (state && !state->pending_throws.empty()) forget_throw(*state, arg);
          tracer.on_c_end(compat::frame_key(frame), arg, what == PyTrace_C_EXCEPTION);
        }
        break;
      default:
        break;
    }
  } catch (...) {
    Tracer::instance().internal_failure("out of memory in the profile function");
  }
  // The program's allocation that failed while we named a native callee: the
  // call is not made and raises MemoryError, as it would have. Elsewhere a
  // failed profile call would leave a frame without its end: not raised.
  if (py::take_memory_failure() && what == PyTrace_C_CALL) {
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

// opcode.opmap: a dict, a frozendict from 3.15 (any mapping is read alike).
int opcode_number(PyObject *opmap, const char *name) {
  PyObject *value = PyMapping_GetItemString(opmap, name);  // new reference
  int number = value ? static_cast<int>(PyLong_AsLong(value)) : -1;
  Py_XDECREF(value);
  PyErr_Clear();  // absent (RETURN_CONST from 3.14): -1
  return number;
}

class ProfileBackend final : public Backend {
 public:
  const char *name() const override { return "setprofile"; }

  void install() override {
    Py_tracefunc other = compat::profile_function_of(PyThreadState_Get());
    if (other && other != profile) {
      throw ActivationError(
          "another profiler (sys.setprofile) is active on this thread; stop it first, or use "
          "backend='sys.monitoring' on CPython 3.12+");
    }
    PyObject *opcode = PyImport_ImportModule("opcode");
    PyObject *opmap = opcode ? PyObject_GetAttrString(opcode, "opmap") : nullptr;
    Py_XDECREF(opcode);
    if (!opmap || !PyMapping_Check(opmap)) {
      Py_XDECREF(opmap);
      throw ActivationError("opcode.opmap: " + py::fetch_error());
    }
    opcodes.resume = opcode_number(opmap, "RESUME");
    opcodes.return_value = opcode_number(opmap, "RETURN_VALUE");
    opcodes.return_const = opcode_number(opmap, "RETURN_CONST");
    // From 3.13 a frame resumed by throw() sits on its RESUME like any
    // resume: only note_throw tells.
    opcodes.yield_value = PY_VERSION_HEX < 0x030D0000 && opcodes.resume >= 0
                              ? opcode_number(opmap, "YIELD_VALUE")
                              : -1;
    Py_DECREF(opmap);
    PyObject *thread_module = PyImport_ImportModule("_thread");
    if (!thread_module) throw ActivationError("import _thread: " + py::fetch_error());
    const char *starters[] = {"start_new_thread", "start_joinable_thread"};  // the latter: 3.13+
    for (int i = 0; i < 2; ++i) {
      Py_CLEAR(thread_starters[i]);
      thread_starters[i] = PyObject_GetAttrString(thread_module, starters[i]);
      if (!thread_starters[i]) py::clear_error();
    }
    Py_DECREF(thread_module);
  }

  void set_events(uint32_t groups) override {
    wanted_groups = groups;
    if (groups != 0 && !hooked_) {
      hook_all_threads();
    } else if (groups == 0 && hooked_) {
      unhook_all_threads();
    }
  }

  void rearm(const std::vector<RearmedCode> &) override {}  // nothing is ever disabled

  void uninstall() override {
    wanted_groups = 0;
    if (hooked_) unhook_all_threads();
  }

 private:
  void hook_all_threads() {
    hook_threads();
    hooked_ = true;
  }

  void unhook_all_threads() {
    hooked_ = false;
    // Only our hook: a profiler the program installed since stays.
    PyInterpreterState *interp = compat::interpreter_of(PyThreadState_Get());
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
      if (compat::profile_function_of(t) == profile) compat::set_profile(t, nullptr, nullptr);
    }
  }

  bool hooked_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_profile_backend() { return std::make_unique<ProfileBackend>(); }

}  // namespace pinsight
