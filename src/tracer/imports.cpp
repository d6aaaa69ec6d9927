#include "tracer/imports.h"

#include <string>
#include <unordered_set>

#include "common/py_util.h"
#include "config/config_store.h"
#include "tracer/tracer.h"

namespace pinsight {
namespace {

// Module names outlive the records naming them (GIL held): one copy per name.
const char *intern(PyObject *name) {
  static auto *names = new std::unordered_set<std::string>();
  Py_ssize_t size = 0;
  const char *utf8 = PyUnicode_AsUTF8AndSize(name, &size);
  if (!utf8) {
    py::clear_error();
    return nullptr;
  }
  return names->emplace(utf8, static_cast<size_t>(size)).first->c_str();
}

// The module the running _find_and_load frame (`frame_key`) loads, or null
// when it is already in sys.modules (nothing is loaded: no event).
const char *module_to_load(const void *frame_key) {
  PyFrameObject *frame = PyEval_GetFrame();  // borrowed
  if (!frame || compat::frame_key(frame) != frame_key) return nullptr;
  PyObject *name = compat::frame_first_argument(frame, "name");
  if (!name) return nullptr;
  const char *module = nullptr;
  if (PyUnicode_Check(name)) {
    PyObject *modules = PyImport_GetModuleDict();  // borrowed
    PyObject *loaded = modules ? PyDict_GetItemWithError(modules, name) : nullptr;
    if (!loaded) {
      py::clear_error();
      module = intern(name);
    }
  }
  Py_DECREF(name);
  return module;
}

}  // namespace

bool imports::named_by(const Config &config) {
  if (config.events & kEventImport) return true;
  for (const ThreadSection &section : config.thread_sections()) {
    if (section.events & kEventImport) return true;
  }
  const LexgionSettings &lexgion = config.python_lexgion_default();
  return lexgion.events_given && (lexgion.events & kEventImport);
}

Verdict Tracer::begin_import(CodeInfo &code, ThreadState &state, const void *frame) {
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  const char *module = module_to_load(frame);
  PyErr_Restore(exc_type, exc_value, exc_tb);
  if (module) {
    // This thread's events, as for a function without a lexgion section of
    // its own: imports are not rate-controlled, and module filters select
    // functions, not the modules loaded.
    const Config *config = config_store::read_lock();
    uint32_t events = config->events_for(config->python_lexgion_default(), state.python_thread_id);
    config_store::read_unlock();
    bool wanted = (events & kEventImport) || (imports_requested_ && events != 0);
    if (!wanted) module = nullptr;
  }
  if (module) {
    // Before the loader's own function_begin: the import frame encloses
    // _find_and_load and all the loading, right under the importing code.
    ++events_emitted_;
    emitter::import(true, module, state.python_thread_id, wire::kImportLoad);
  }
  size_t depth = state.stack.size();
  // The loader's own function events follow its decision; its begins are
  // never disabled while imports may be recorded.
  begin_execution<false>(code, state, frame);
  if (!module) return Verdict::Continue;
  if (state.stack.size() == depth) {
    state.stack.push_back({frame, &code, nullptr, nullptr, 0, RecordKind::Function, 0});
    ++code.open_records;
    ++open_records_;
  }
  FrameRecord &record = state.stack.back();
  record.flags |= kImportEmitted;
  record.callee_name = module;
  return Verdict::Continue;
}

void Tracer::end_import(const FrameRecord &record, const ThreadState &state, int transition) {
  ++events_emitted_;
  emitter::import(false, record.callee_name, state.python_thread_id,
                  transition == wire::kUnwind ? wire::kImportRaise : wire::kImportReturn);
}

}  // namespace pinsight
