#include "tracer/code_info.h"

#include <algorithm>
#include <cstring>

#include "common/py_util.h"
#include "tracer/legacy_qualname.h"
#include "tracer/tasks.h"

namespace pinsight::code_registry {

Py_ssize_t extra_index = -1;
PointerMap<CodeInfo *> *beside = nullptr;

namespace {
CodeInfo *live_head = nullptr;
size_t live = 0;
uint64_t created = 0;
void (*forget_hook)(CodeInfo &) = nullptr;
void (*created_hook)(CodeInfo &) = nullptr;

bool code_names_setprofile(PyCodeObject *code) {
  PyObject *names = code->co_names;  // a tuple of str
  if (!names || !PyTuple_Check(names)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
    const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i));
    if (!name) {
      py::clear_error();
      continue;
    }
    if (std::strstr(name, "setprofile")) return true;
  }
  return false;
}

// Called by CPython (GIL held) when a code object with an extra array dies:
// for every registered index, ours included when another co_extra user (a
// PEP 523 frame evaluator, a JIT's cache) set only its own slot.
void free_code_info(void *extra) {
  if (!extra) return;
  auto *info = static_cast<CodeInfo *>(extra);
  // A live frame keeps its code alive, so records naming this one are stale:
  // the tracer drops them before the memory goes, and uncounts its window gates.
  if ((info->open_records || info->suspended_traced || info->uncapped_gates) && forget_hook) {
    forget_hook(*info);
  }
  if (info->prev) info->prev->next = info->next;
  if (info->next) info->next->prev = info->prev;
  if (live_head == info) live_head = info->next;
  --live;
  delete info;
}

// Module name from the globals the code runs with: the running frame's at
// PY_START (callee) and CALL (caller) alike.
std::string module_name(PyObject *globals) {
  if (!globals) globals = PyEval_GetGlobals();  // borrowed
  if (!globals || !PyDict_Check(globals)) return std::string();
  PyObject *name = PyDict_GetItemString(globals, "__name__");  // borrowed
  return py::utf8_or(name, "");
}
// The code watcher's (3.14+): `code` is about to be freed.
void forget_code(PyObject *code) {
  CodeInfo **found = beside->find(code);
  if (!found) return;
  CodeInfo *info = *found;
  beside->erase_found(found);
  free_code_info(info);
}

// importlib's _find_and_load, frozen or (python -X frozen_modules=off) from
// source: CPython calls it only for a module not yet in sys.modules.
bool is_import_loader(const std::string &qualname, const std::string &filename) {
  if (qualname != "_find_and_load") return false;
  static const std::string frozen = "<frozen importlib._bootstrap>";
  static const std::string source = "importlib/_bootstrap.py";
  return filename == frozen ||
         (filename.size() >= source.size() &&
          filename.compare(filename.size() - source.size(), source.size(), source) == 0);
}
}  // namespace

void set_forget_hook(void (*hook)(CodeInfo &)) { forget_hook = hook; }
void set_created_hook(void (*hook)(CodeInfo &)) { created_hook = hook; }

bool init() {
  if (initialized()) return true;
  if constexpr (compat::kCodeExtraIsState) {
    if (!compat::watch_code_destruction(forget_code)) return false;
    beside = new PointerMap<CodeInfo *>();  // for the process's life
    return true;
  }
  extra_index = compat::request_code_extra_index(free_code_info);
  return extra_index >= 0;
}

CodeInfo *create(PyObject *code, PyObject *globals) {
  if (!PyCode_Check(code)) return nullptr;
  auto *pycode = reinterpret_cast<PyCodeObject *>(code);
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  auto info = std::make_unique<CodeInfo>();
  info->code = code;
  info->names.set(compat::has_code_qualname()
                      ? py::utf8_or(compat::code_qualname(pycode), "<unknown>")
                      : legacy_qualname::resolve(pycode, globals),
                  py::utf8_or(pycode->co_filename, "<unknown>"));
  info->lineno = pycode->co_firstlineno;
  info->module = module_name(globals);
  info->special =
      (is_import_loader(info->names.qualname(), info->names.filename()) ? kImportLoader : 0) |
      tasks::special_role(info->names.qualname(), info->names.filename());
  info->generator = compat::is_generator_code(pycode);
  info->coroutine = compat::is_coroutine_code(pycode);
  info->names_setprofile = code_names_setprofile(pycode);
  CodeInfo *result = nullptr;
  if (compat::kCodeExtraIsState) {
    beside->put(code, info.get());
  }
  if (compat::kCodeExtraIsState || compat::code_set_own_extra(code, extra_index, info.get()) == 0) {
    result = info.release();
    result->next = live_head;
    if (live_head) live_head->prev = result;
    live_head = result;
    ++live;
    ++created;
    if (created_hook) created_hook(*result);
  } else {
    py::clear_error();
  }
  PyErr_Restore(exc_type, exc_value, exc_tb);
  return result;
}

CodeInfo *first() { return live_head; }
size_t live_count() { return live; }
uint64_t created_count() { return created; }

}  // namespace pinsight::code_registry

namespace pinsight {

ThreadLexgion &CodeInfo::other_thread(int python_thread_id) {
  if (!other_threads) other_threads = std::make_unique<std::unordered_map<int, ThreadLexgion>>();
  return (*other_threads)[python_thread_id];
}

int CodeInfo::line_at(int offset) {
  auto it =
      std::lower_bound(call_lines.begin(), call_lines.end(), std::make_pair(offset, INT32_MIN));
  if (it != call_lines.end() && it->first == offset) return it->second;
  int line = compat::code_line_at(reinterpret_cast<PyCodeObject *>(code), offset);
  call_lines.insert(it, {offset, line});
  return line;
}

}  // namespace pinsight
