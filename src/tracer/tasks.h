// asyncio tasks: which task runs each coroutine step. A task's step is its
// outermost coroutine resumed (or started) from C, by the Task's step; that
// begin is where the task is found (asyncio.current_task(), whatever loop and
// Task implementation run it: _asyncio's, the pure-Python one, uvloop's loop)
// and nothing else of the program's events costs anything new. Nothing is kept
// per task: a task is its object's address while it lives, and the thread's
// running steps (ThreadState::task_steps) are all the state there is.
//
// asyncio's own objects are found in sys.modules when first needed, never
// imported here: a program without asyncio never meets any of this.
#pragma once

#include <cstdint>
#include <string>

#include "common/compat.h"

namespace pinsight::tasks {

// The task running on this thread's event loop now (new reference), or null:
// no loop runs, or no task (a callback). GIL held; the pending error is kept.
PyObject *current_task();
// What the coroutine `coro`, starting or resuming at the thread's current frame,
// is to `task`: its coroutine (task.get_coro()), one its coroutine awaits (a
// throw() resumes the innermost awaited coroutine first, its awaiters linked
// above it as they stay suspended: generator_of(frame) names them), or neither
// (a coroutine driven by hand inside a task's step is not one of its steps).
enum class CoroutineRole { None, Own, Awaited };
CoroutineRole role_of(PyObject *task, PyObject *coro, PyObject *(*generator_of)(const void *));
// task.get_name(), or "" (written once per task).
std::string name_of(PyObject *task);
// Whether `object` is an asyncio Task (of either implementation, or a subclass).
bool is_task(PyObject *object);
// The tasks among a gather's children, when `object` is gather()'s future;
// calls fn(task) for each.
template <typename Fn>
void for_each_gathered(PyObject *object, Fn fn);
// How a task's coroutine left by an exception ended it: `exception` (null
// when the backend cannot tell it: setprofile) is CancelledError, or the task
// was asked to cancel (Task.cancelling(), 3.11+).
int unwind_kind(PyObject *task, PyObject *exception);
// concurrent.futures' work item `self` of a frame of _WorkItem.run: its future
// (the id its submit returned), or 0.
uintptr_t work_item_future(PyObject *work_item);

namespace detail {
PyObject *gathering_children(PyObject *object);  // new reference to a list, or null
}

template <typename Fn>
void for_each_gathered(PyObject *object, Fn fn) {
  PyObject *children = detail::gathering_children(object);
  if (!children) return;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(children); ++i) {
    PyObject *child = PyList_GET_ITEM(children, i);
    if (is_task(child)) fn(child);
  }
  Py_DECREF(children);
}

// Which of asyncio's and concurrent.futures' functions a code object is, by
// its qualified name and file (CodeInfo::special).
uint8_t special_role(const std::string &qualname, const std::string &filename);

}  // namespace pinsight::tasks
