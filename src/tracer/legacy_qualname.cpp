#include "tracer/legacy_qualname.h"

#include <unordered_map>
#include <utility>

#include "common/py_util.h"
#include "tracer/code_info.h"

namespace pinsight::legacy_qualname {
namespace {

// Qualified names found for code objects not seen yet, each holding a
// reference so that its address cannot be reused by another code object
// before resolve() takes the name.
std::unordered_map<const void *, std::pair<std::string, PyObject *>> &known() {
  static auto *map = new std::unordered_map<const void *, std::pair<std::string, PyObject *>>();
  return *map;
}

// Module namespaces already searched, with their size then: a namespace
// that grew (functions defined at run time) is searched again.
std::unordered_map<const void *, std::pair<PyObject *, Py_ssize_t>> &searched() {
  static auto *map = new std::unordered_map<const void *, std::pair<PyObject *, Py_ssize_t>>();
  return *map;
}

std::string code_name(PyCodeObject *code) { return py::utf8_or(code->co_name, ""); }

void remember(PyCodeObject *code, const std::string &qualname) {
  auto *object = reinterpret_cast<PyObject *>(code);
  if (code_registry::initialized() && code_registry::find(object)) return;  // named already
  auto [it, inserted] = known().try_emplace(object, qualname, object);
  if (inserted) Py_INCREF(object);
}

enum class Scope { Module, Function, Class };

// The compiler's naming (compile.c, compiler_set_qualname): inside a
// function "outer.<locals>.name", inside a class "Class.name".
void name_children(PyCodeObject *parent, const std::string &parent_qualname, Scope scope,
                   int depth = 0) {
  PyObject *consts = parent->co_consts;
  if (!consts || !PyTuple_Check(consts) || depth > 64) return;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts); ++i) {
    PyObject *item = PyTuple_GET_ITEM(consts, i);
    if (!PyCode_Check(item)) continue;
    auto *child = reinterpret_cast<PyCodeObject *>(item);
    std::string name = code_name(child);
    std::string qualname = scope == Scope::Module     ? name
                           : scope == Scope::Function ? parent_qualname + ".<locals>." + name
                                                      : parent_qualname + "." + name;
    remember(child, qualname);
    // Function bodies get fresh locals; class bodies do not.
    name_children(child, qualname,
                  (child->co_flags & CO_NEWLOCALS) ? Scope::Function : Scope::Class, depth + 1);
  }
}

void name_function(PyObject *function, int depth = 0) {
  if (!PyFunction_Check(function) || depth > 8) return;
  auto *fn = reinterpret_cast<PyFunctionObject *>(function);
  auto *code = reinterpret_cast<PyCodeObject *>(fn->func_code);
  std::string qualname = py::utf8_or(fn->func_qualname, "");
  std::string name = code_name(code);
  size_t dot = qualname.rfind('.');
  std::string last = dot == std::string::npos ? qualname : qualname.substr(dot + 1);
  if (!qualname.empty() && last == name) {
    remember(code, qualname);
    name_children(code, qualname, Scope::Function);
  }
  // functools.wraps copies the wrapped function's name onto the wrapper:
  // the original is one step further.
  if (fn->func_dict && PyDict_Check(fn->func_dict)) {
    PyObject *wrapped = PyDict_GetItemString(fn->func_dict, "__wrapped__");  // borrowed
    if (wrapped) name_function(wrapped, depth + 1);
  }
}

void name_class(PyTypeObject *type, const std::string &module, int depth) {
  if (depth > 8 || !type->tp_dict) return;
  PyObject *type_module = PyDict_GetItemString(type->tp_dict, "__module__");  // borrowed
  if (py::utf8_or(type_module, "") != module) return;
  std::string qualname = py::utf8_or(reinterpret_cast<PyHeapTypeObject *>(type)->ht_qualname, "");
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(type->tp_dict, &pos, &key, &value)) {
    if (PyFunction_Check(value)) {
      name_function(value);
    } else if (Py_IS_TYPE(value, &PyStaticMethod_Type) || Py_IS_TYPE(value, &PyClassMethod_Type)) {
      PyObject *function = py::attribute_or_null(value, "__func__");
      if (function) name_function(function);
      Py_XDECREF(function);
    } else if (Py_IS_TYPE(value, &PyProperty_Type)) {
      for (const char *accessor : {"fget", "fset", "fdel"}) {
        PyObject *function = py::attribute_or_null(value, accessor);
        if (function) name_function(function);
        Py_XDECREF(function);
      }
    } else if (PyType_Check(value) &&
               (reinterpret_cast<PyTypeObject *>(value)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
      auto *nested = reinterpret_cast<PyTypeObject *>(value);
      std::string nested_qualname =
          py::utf8_or(reinterpret_cast<PyHeapTypeObject *>(nested)->ht_qualname, "");
      if (nested_qualname.compare(0, qualname.size() + 1, qualname + ".") == 0) {
        name_class(nested, module, depth + 1);
      }
    }
  }
}

// Functions and classes defined in the module whose namespace is `globals`.
void search_namespace(PyObject *globals) {
  if (!PyDict_Check(globals)) return;
  Py_ssize_t size = PyDict_Size(globals);
  auto found = searched().find(globals);
  if (found != searched().end()) {
    if (found->second.second == size) return;
    found->second.second = size;
  } else {
    Py_INCREF(globals);
    searched().emplace(globals, std::make_pair(globals, size));
  }
  std::string module = py::utf8_or(PyDict_GetItemString(globals, "__name__"), "");
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(globals, &pos, &key, &value)) {
    if (PyFunction_Check(value)) {
      if (reinterpret_cast<PyFunctionObject *>(value)->func_globals == globals) {
        name_function(value);
      }
    } else if (PyType_Check(value) &&
               (reinterpret_cast<PyTypeObject *>(value)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
      name_class(reinterpret_cast<PyTypeObject *>(value), module, 0);
    }
  }
}

bool take(PyCodeObject *code, std::string *qualname) {
  auto it = known().find(code);
  if (it == known().end()) return false;
  *qualname = std::move(it->second.first);
  PyObject *reference = it->second.second;
  known().erase(it);
  Py_DECREF(reference);
  return true;
}

}  // namespace

std::string resolve(PyCodeObject *code, PyObject *globals) {
  std::string qualname;
  if (take(code, &qualname)) return qualname;
  std::string name = code_name(code);
  if (name == "<module>") {
    // A module starting: everything it defines is named from here.
    name_children(code, std::string(), Scope::Module);
    return name;
  }
  if (!globals) globals = PyEval_GetGlobals();  // borrowed
  if (globals) {
    search_namespace(globals);
    if (take(code, &qualname)) return qualname;
  }
  return name.empty() ? std::string("<unknown>") : name;
}

void clear() {
  auto old_known = std::move(known());
  known().clear();
  for (auto &entry : old_known) Py_DECREF(entry.second.second);
  auto old_searched = std::move(searched());
  searched().clear();
  for (auto &entry : old_searched) Py_DECREF(entry.second.first);
}

}  // namespace pinsight::legacy_qualname
