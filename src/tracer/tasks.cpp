#include "tracer/tasks.h"

#include <cstring>

#include "common/py_util.h"
#include "format/wire.h"
#include "tracer/code_info.h"
#include "tracer/tracer.h"

namespace pinsight::tasks {
namespace {

// asyncio's objects this module asks about, found once asyncio.tasks is
// loaded and held for the process's life (never released: callbacks may come
// during finalization, after the modules are gone).
struct Asyncio {
  bool found = false;
  PyObject *current_task = nullptr;  // asyncio.current_task (C or Python)
  PyObject *task_types[2] = {};      // asyncio.Task, and the pure-Python one if distinct
  PyObject *gathering = nullptr;     // asyncio.tasks._GatheringFuture
  PyObject *cancelled = nullptr;     // asyncio.CancelledError
};
Asyncio asyncio;

// Interned method and attribute names, made once.
PyObject *name_get_coro = nullptr;
PyObject *name_get_name = nullptr;
PyObject *name_cancelling = nullptr;
PyObject *name_children = nullptr;
PyObject *name_future = nullptr;

PyObject *interned(PyObject *&slot, const char *text) {
  if (!slot) slot = PyUnicode_InternFromString(text);
  return slot;
}

// The error pending when we started, put back whatever our calls did.
class KeptError {
 public:
  KeptError() { PyErr_Fetch(&type_, &value_, &traceback_); }
  ~KeptError() {
    PyErr_Clear();  // ours, not the program's: never raised into it
    PyErr_Restore(type_, value_, traceback_);
  }
  KeptError(const KeptError &) = delete;
  KeptError &operator=(const KeptError &) = delete;

 private:
  PyObject *type_, *value_, *traceback_;
};

PyObject *module_attribute(PyObject *module, const char *name) {
  PyObject *value = module ? PyObject_GetAttrString(module, name) : nullptr;
  if (!value) PyErr_Clear();
  return value;
}

bool find_asyncio() {
  if (asyncio.found) return true;
  // Asked at every coroutine the loop would resume until asyncio is loaded (trio's
  // steps, a coroutine driven by hand): one lookup in sys.modules.
  static PyObject *name = PyUnicode_InternFromString("asyncio.tasks");
  PyObject *module = name ? PyImport_GetModule(name) : nullptr;  // not imported: null
  if (!module) {
    PyErr_Clear();
    return false;
  }
  asyncio.current_task = module_attribute(module, "current_task");
  asyncio.task_types[0] = module_attribute(module, "Task");
  asyncio.task_types[1] = module_attribute(module, "_PyTask");
  if (asyncio.task_types[1] == asyncio.task_types[0]) Py_CLEAR(asyncio.task_types[1]);
  asyncio.gathering = module_attribute(module, "_GatheringFuture");
  PyObject *exceptions = PyImport_AddModule("asyncio.exceptions");  // borrowed (3.8+)
  if (!exceptions) PyErr_Clear();
  asyncio.cancelled = module_attribute(exceptions, "CancelledError");
  Py_DECREF(module);
  asyncio.found = asyncio.current_task != nullptr && asyncio.task_types[0] != nullptr &&
                  PyType_Check(asyncio.task_types[0]);
  return asyncio.found;
}

bool ends_with(const std::string &text, const char *suffix) {
  size_t size = std::strlen(suffix);
  return text.size() >= size && text.compare(text.size() - size, size, suffix) == 0;
}

}  // namespace

PyObject *current_task() {
  if (!find_asyncio()) return nullptr;
  KeptError kept;
  PyObject *task = PyObject_CallObject(asyncio.current_task, nullptr);
  if (task == Py_None) Py_CLEAR(task);
  return task;
}

CoroutineRole role_of(PyObject *task, PyObject *coro, PyObject *(*generator_of)(const void *)) {
  if (!interned(name_get_coro, "get_coro")) return CoroutineRole::None;
  KeptError kept;
  PyObject *own = PyObject_CallMethodObjArgs(task, name_get_coro, nullptr);
  if (!own) return CoroutineRole::None;
  CoroutineRole role = own == coro ? CoroutineRole::Own : CoroutineRole::None;
  // Rare (a throw() into a task awaiting a coroutine): the awaiters are the frames
  // above, generator frames up to the task's own (cr_await says nothing while
  // the throw is delegated).
  PyFrameObject *frame = role == CoroutineRole::None ? PyEval_GetFrame() : nullptr;
  Py_XINCREF(frame);
  for (int depth = 0; frame && depth < 1000; ++depth) {
    PyFrameObject *back = compat::frame_back(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
    if (!frame || !compat::is_generator_code(compat::frame_code(frame))) break;
    if (generator_of(compat::frame_key(frame)) == own) {
      role = CoroutineRole::Awaited;
      break;
    }
  }
  Py_XDECREF(frame);
  Py_DECREF(own);
  return role;
}

std::string name_of(PyObject *task) {
  if (!interned(name_get_name, "get_name")) return std::string();
  KeptError kept;
  PyObject *name = PyObject_CallMethodObjArgs(task, name_get_name, nullptr);
  std::string text = py::utf8_or(name, "");
  Py_XDECREF(name);
  return text;
}

bool is_task(PyObject *object) {
  if (!object || !find_asyncio()) return false;
  for (PyObject *type : asyncio.task_types) {
    if (type && PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject *>(type))) return true;
  }
  return false;
}

PyObject *detail::gathering_children(PyObject *object) {
  if (!object || !find_asyncio() || !asyncio.gathering || !PyType_Check(asyncio.gathering) ||
      !PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject *>(asyncio.gathering)) ||
      !interned(name_children, "_children")) {
    return nullptr;
  }
  KeptError kept;
  PyObject *children = PyObject_GetAttr(object, name_children);
  if (children && !PyList_Check(children)) Py_CLEAR(children);
  return children;
}

int unwind_kind(PyObject *task, PyObject *exception) {
  if (exception) {
    if (asyncio.cancelled && PyExceptionInstance_Check(exception) &&
        PyObject_TypeCheck(exception, reinterpret_cast<PyTypeObject *>(asyncio.cancelled))) {
      return wire::kTaskCancelled;
    }
    return wire::kTaskRaised;
  }
  // setprofile hides the exception; a task asked to cancel that unwinds is
  // cancelled unless it caught the CancelledError and raised another one.
  if (!task || !interned(name_cancelling, "cancelling")) return wire::kTaskRaised;
  KeptError kept;
  PyObject *count = PyObject_CallMethodObjArgs(task, name_cancelling, nullptr);
  long requests = count && PyLong_Check(count) ? PyLong_AsLong(count) : 0;
  Py_XDECREF(count);
  return requests > 0 ? wire::kTaskCancelled : wire::kTaskRaised;
}

uintptr_t work_item_future(PyObject *work_item) {
  if (!work_item || !interned(name_future, "future")) return 0;
  KeptError kept;
  PyObject *future = PyObject_GetAttr(work_item, name_future);
  auto id = reinterpret_cast<uintptr_t>(future);
  Py_XDECREF(future);  // the work item holds it
  return future == Py_None ? 0 : id;
}

uint8_t special_role(const std::string &qualname, const std::string &filename) {
  if (ends_with(filename, "asyncio/tasks.py")) {
    // _ensure_future from 3.10; ensure_future itself before.
    if (qualname == "create_task" || qualname == "ensure_future" || qualname == "_ensure_future") {
      return kTaskCreator;
    }
  } else if (ends_with(filename, "asyncio/base_events.py")) {
    if (qualname == "BaseEventLoop.create_task") return kTaskCreator;
  } else if (ends_with(filename, "asyncio/taskgroups.py")) {
    if (qualname == "TaskGroup.create_task") return kTaskCreator;
  } else if (ends_with(filename, "concurrent/futures/thread.py")) {
    // Made by ThreadPoolExecutor.submit before it is queued (a worker may run it
    // before submit returns).
    if (qualname == "_WorkItem.__init__") return kExecutorSubmit;
    if (qualname == "_WorkItem.run") return kWorkItemRun;
  }
  return 0;
}

}  // namespace pinsight::tasks

// ---------------------------------------------------------------------------
// The tracer's side: steps, creations, hand-offs (GIL held, TRACING).

namespace pinsight {

namespace {
// The work item of the _WorkItem method running at `frame`: its future's id, or 0.
uintptr_t work_of_frame(const void *frame) {
  PyFrameObject *running = PyEval_GetFrame();  // borrowed
  if (!running || compat::frame_key(running) != frame) return 0;
  PyObject *self = compat::frame_first_argument(running, "self");
  uintptr_t work = tasks::work_item_future(self);
  Py_XDECREF(self);
  return work;
}
}  // namespace

Verdict Tracer::begin_special(CodeInfo &code, ThreadState &state, const void *frame) {
  if (code.special & kImportLoader) {
    if (imports_possible_.load(std::memory_order_relaxed)) return begin_import(code, state, frame);
    return begin_execution<true>(code, state, frame);
  }
  const size_t depth = state.stack.size();
  const Verdict verdict = begin_execution<true>(code, state, frame);
  if (state.stack.size() != depth + 1 || !(state.stack.back().flags & kBeginEmitted)) {
    return verdict;  // not traced: its begin and end say nothing
  }
  if (code.special & (kTaskCreator | kExecutorSubmit)) state.stack.back().flags |= kAsyncioEnd;
  if (code.special & kWorkItemRun) {
    // After the work item's function_begin: the frame the reader attributes.
    if (uintptr_t work = work_of_frame(frame)) {
      ++events_emitted_;
      emitter::task_handoff(0, state.python_thread_id, work, wire::kHandoffRun);
    }
  }
  return verdict;
}

void Tracer::begin_task_step(ThreadState &state, const void *frame, int transition) {
  // The frame's own record is on top; the one below tells who resumed it: a
  // coroutine awaiting it (a step of the same task goes on), or the loop.
  const size_t size = state.stack.size();
  if (size >= 2) {
    const FrameRecord &below = state.stack[size - 2];
    if (below.kind == RecordKind::Function && below.code->generator) return;
  }
  PyObject *task = tasks::current_task();
  if (!task) return;
  PyObject *coro = generator_of_frame(frame);  // borrowed
  const tasks::CoroutineRole role =
      coro ? tasks::role_of(task, coro, generator_of_frame) : tasks::CoroutineRole::None;
  if (role == tasks::CoroutineRole::None) {
    Py_DECREF(task);
    return;
  }
  const auto id = reinterpret_cast<uintptr_t>(task);
  if (transition == wire::kStart) {
    // Its name once, with its coroutine's start (task_create names it too, where
    // a creation function of asyncio's made it).
    ++events_emitted_;
    emitter::task_name(id, state.python_thread_id, tasks::name_of(task).c_str());
  }
  Py_DECREF(task);  // its step, running now, holds it until this frame's end
  // An awaiting coroutine goes on with the step an inner one began (throw()).
  const bool continues = state.continuing_task == id;
  state.continuing_task = 0;
  ++events_emitted_;
  emitter::task_step(id, state.python_thread_id,
                     continues ? wire::kTaskStepContinue : wire::kTaskStepBegin);
  state.task_steps.push_back({frame, id, role == tasks::CoroutineRole::Awaited});
  state.stack.back().flags |= kTaskStep;
  state.last_created = 0;
}

void Tracer::end_task_step(const FrameRecord &record, ThreadState &state, int transition,
                           PyObject *value) {
  uintptr_t task = 0;
  bool awaited = false;
  while (!state.task_steps.empty()) {
    const ThreadState::TaskStep step = state.task_steps.back();
    state.task_steps.pop_back();
    if (step.frame == record.frame) {
      task = step.task;
      awaited = step.awaited;
      break;
    }
  }
  if (!task) return;
  state.last_created = 0;
  if (awaited && transition != wire::kYield) {
    // An awaited coroutine a throw() resumed ended: its awaiter goes on with the
    // step (its task is not done).
    state.continuing_task = task;
    return;
  }
  const int thread = state.python_thread_id;
  if (transition == wire::kYield) {
    // What the task waits on now: another task (await task), a gather of tasks.
    if (tasks::is_task(value)) {
      ++events_emitted_;
      emitter::task_await(task, thread, reinterpret_cast<uintptr_t>(value));
    } else {
      tasks::for_each_gathered(value, [&](PyObject *child) {
        ++events_emitted_;
        emitter::task_await(task, thread, reinterpret_cast<uintptr_t>(child));
      });
    }
    return;
  }
  // Still alive: the task's step, which holds it, is what this frame returns to.
  const int how = transition == wire::kReturn
                      ? wire::kTaskReturned
                      : tasks::unwind_kind(reinterpret_cast<PyObject *>(task), value);
  ++events_emitted_;
  emitter::task_done(task, thread, how);
}

void Tracer::end_asyncio_call(const FrameRecord &record, ThreadState &state, int transition,
                              PyObject *value) {
  if (transition != wire::kReturn || !value) return;
  if (record.code->special & kTaskCreator) {
    const auto id = reinterpret_cast<uintptr_t>(value);
    if (id == state.last_created || !tasks::is_task(value)) return;  // named, or a future
    state.last_created = id;
    const std::string name = tasks::name_of(value);
    ++events_emitted_;
    emitter::task_create(reinterpret_cast<uintptr_t>(value), state.python_thread_id, name.c_str());
  } else if ((record.code->special & kExecutorSubmit) && !state.task_steps.empty()) {
    if (uintptr_t work = work_of_frame(record.frame)) {
      ++events_emitted_;
      emitter::task_handoff(state.task_steps.back().task, state.python_thread_id, work,
                            wire::kHandoffSubmit);
    }
  }
}

void Tracer::untraced_coroutine_end(ThreadState &state, const void *frame, int transition,
                                    PyObject *value) {
  // Awaited by a traced coroutine: not a task's outermost one.
  if (!state.stack.empty() && state.stack.back().kind == RecordKind::Function &&
      state.stack.back().code->generator) {
    return;
  }
  PyObject *task = tasks::current_task();
  if (!task) return;
  PyObject *coro = generator_of_frame(frame);
  if (coro && tasks::role_of(task, coro, generator_of_frame) == tasks::CoroutineRole::Own) {
    const int how =
        transition == wire::kReturn ? wire::kTaskReturned : tasks::unwind_kind(task, value);
    ++events_emitted_;
    emitter::task_done(reinterpret_cast<uintptr_t>(task), state.python_thread_id, how);
    state.last_created = 0;
  }
  Py_DECREF(task);
}

}  // namespace pinsight
