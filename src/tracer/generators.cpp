#include "tracer/generators.h"

#include <chrono>
#include <string>
#include <vector>

#include "common/py_util.h"
#include "emit/emitter.h"
#include "tracer/thread_state.h"

namespace pinsight {
namespace {

PyObject *dead_callback = nullptr;  // the weak references' callback, made once

#if PY_VERSION_HEX >= 0x030B0000
// Bytes from a generator object to the interpreter frame it embeds (the frame
// key). Private layout, so measured at activation on one object of each kind
// rather than read from a header, and only used when all kinds agree.
Py_ssize_t frame_offset = -1;

bool is_generator_kind(PyObject *object) {
  return Py_IS_TYPE(object, &PyGen_Type) || Py_IS_TYPE(object, &PyCoro_Type) ||
         Py_IS_TYPE(object, &PyAsyncGen_Type);
}

bool measure_frame_offset(std::string *error) {
  PyObject *globals = PyDict_New();
  if (!globals) return false;
  PyObject *done = PyRun_String(
      "def gen():\n    yield\n"
      "async def coro():\n    pass\n"
      "async def agen():\n    yield\n"
      "objects = [(gen(), 'gi_frame'), (coro(), 'cr_frame'), (agen(), 'ag_frame')]\n",
      Py_file_input, globals, globals);
  Py_XDECREF(done);
  PyObject *objects = done ? PyDict_GetItemString(globals, "objects") : nullptr;  // borrowed
  Py_ssize_t offset = -1;
  bool agree = objects && PyList_Check(objects);
  for (Py_ssize_t i = 0; agree && i < PyList_GET_SIZE(objects); ++i) {
    PyObject *pair = PyList_GET_ITEM(objects, i);
    PyObject *object = PyTuple_GET_ITEM(pair, 0);
    PyObject *frame = PyObject_GetAttr(object, PyTuple_GET_ITEM(pair, 1));
    if (!frame || !PyFrame_Check(frame) || !is_generator_kind(object)) {
      Py_XDECREF(frame);
      agree = false;
      break;
    }
    const char *key =
        static_cast<const char *>(compat::frame_key(reinterpret_cast<PyFrameObject *>(frame)));
    Py_ssize_t here = key - reinterpret_cast<const char *>(object);
    Py_DECREF(frame);
    agree = here > 0 && here < Py_TYPE(object)->tp_basicsize && (offset < 0 || here == offset);
    offset = here;
    if (PyCoro_CheckExact(object)) {  // a coroutine never awaited warns: close it
      PyObject *closed = PyObject_CallMethod(object, "close", nullptr);
      Py_XDECREF(closed);
    }
  }
  if (PyErr_Occurred()) {
    *error = py::fetch_error();
    agree = false;
  } else if (!agree) {
    *error = "generators, coroutines and async generators do not embed their frames alike";
  }
  Py_DECREF(globals);
  if (agree) frame_offset = offset;
  return agree;
}
#endif

// The generator, coroutine or async generator running at `frame` (borrowed),
// or null. Only asked for frames of generator code, at their yield.
PyObject *generator_at(const void *frame) {
#if !PINSIGHT_CPYTHON_VERIFIED
  (void)frame;
  return nullptr;
#elif PY_VERSION_HEX >= 0x030B0000
  if (frame_offset < 0) return nullptr;
  auto *object = reinterpret_cast<PyObject *>(const_cast<char *>(static_cast<const char *>(frame)) -
                                              frame_offset);
  return is_generator_kind(object) ? object : nullptr;
#else
  return reinterpret_cast<PyFrameObject *>(const_cast<void *>(frame))->f_gen;
#endif
}

PyObject *on_generator_dead(PyObject *, PyObject *weakref) {
  generator_table().generator_died(weakref);
  Py_RETURN_NONE;
}
PyMethodDef dead_callback_def = {"_pinsight_generator_dead", on_generator_dead, METH_O, nullptr};

}  // namespace

PyObject *generator_of_frame(const void *frame) { return generator_at(frame); }

GeneratorTable &generator_table() {
  // Made on first use: the tracer's own static initialisation asks for it,
  // whatever the order of the translation units. Never destroyed: callbacks
  // may come late.
  static GeneratorTable &table = *new GeneratorTable();
  return table;
}

bool GeneratorTable::init(std::string *error) {
  if (!dead_callback) {
    dead_callback = PyCFunction_New(&dead_callback_def, nullptr);
    if (!dead_callback) {
      *error = py::fetch_error();
      return false;
    }
  }
#if PY_VERSION_HEX >= 0x030B0000
  if (frame_offset < 0 && !measure_frame_offset(error)) return false;
#endif
  return true;
}

uint64_t lifetime_clock_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

namespace {
void emit_lifetime(const GeneratorTable::Entry &entry, int python_thread_id, int how) {
  // Only instances whose start went out: the reader times them from it.
  if (entry.started_ns == 0 || !(entry.flags & kBeginEmitted)) return;
  emitter::generator_end(*entry.code, python_thread_id, lifetime_clock_ns() - entry.started_ns,
                         entry.segments, how);
}
}  // namespace

bool GeneratorTable::suspend(const void *frame, CodeInfo &code, uint8_t flags,
                             uint64_t started_ns) {
  if (Entry *entry = by_frame_.find(frame)) {
    entry->flags = flags;
    if (entry->running) {
      entry->running = false;
      ++code.suspended_traced;
    }
    return true;
  }
  PyObject *generator = generator_at(frame);
  if (!generator) return false;
  // Python code may run here before 3.12 (a collection started by the
  // allocation): no entry is held across it.
  PyObject *weakref = PyWeakref_NewRef(generator, dead_callback);
  if (!weakref) {
    py::clear_error();
    return false;
  }
  compat::hide_from_tracemalloc(weakref);
  by_frame_.put(frame, Entry{&code, weakref, started_ns, 1, flags, false});
  by_weakref_.put(weakref, frame);
  ++code.suspended_traced;
  return true;
}

bool GeneratorTable::resume(const void *frame, uint8_t *flags) {
  Entry *entry = by_frame_.find(frame);
  if (!entry || entry->running) return false;
  entry->running = true;
  ++entry->segments;
  --entry->code->suspended_traced;
  *flags = entry->flags;
  return true;
}

void GeneratorTable::finish(const void *frame, int python_thread_id, int how) {
  Entry *entry = by_frame_.find(frame);
  if (!entry) return;
  emit_lifetime(*entry, python_thread_id, how);
  erase(entry);
}

void GeneratorTable::erase(Entry *found) {
  Entry entry = *found;
  by_frame_.erase_found(found);
  by_weakref_.erase(entry.weakref);
  if (!entry.running) --entry.code->suspended_traced;
  Py_DECREF(entry.weakref);  // a weak reference's own death calls no callback
}

template <typename Keep>
void GeneratorTable::erase_unless(Keep keep) {
  // Collected first: erasing moves other entries within the table.
  std::vector<const void *> frames;
  by_frame_.for_each([&](const void *frame, Entry &entry) {
    if (!keep(entry)) frames.push_back(frame);
  });
  for (const void *frame : frames) erase(by_frame_.find(frame));
}

void GeneratorTable::forget_code(const CodeInfo &code) {
  erase_unless([&](const Entry &entry) { return entry.code != &code; });
}

void GeneratorTable::clear() {
  erase_unless([](const Entry &) { return false; });
}

void GeneratorTable::generator_died(PyObject *weakref) {
  // The generator is being deallocated (its frame, and so its code, still
  // alive); nothing of it will run again under this identity. If its
  // finalizer runs a handler (a finally around the yield), that last segment
  // finds no entry and goes untraced, balanced.
  const void *const *found = by_weakref_.find(weakref);
  if (!found) return;
  const void *frame = *found;
  Entry *entry = by_frame_.find(frame);
  if (!entry) return;
  const ThreadState *state = thread_states::current_ptr;
  emit_lifetime(*entry, state ? state->python_thread_id : -1, wire::kGeneratorCollected);
  erase(entry);
}

}  // namespace pinsight
