#include "tracer/callable_names.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace pinsight::callables {
namespace {

// Names never die: records on shadow stacks point at them, and the set of
// distinct names in a program is small.
std::unordered_set<std::string> &interned_names() {
  static auto *names = new std::unordered_set<std::string>();
  return *names;
}
const char *intern(std::string name) {
  return interned_names().insert(std::move(name)).first->c_str();
}

struct PairHash {
  size_t operator()(const std::pair<const void *, const void *> &key) const {
    return std::hash<const void *>()(key.first) * 31u ^ std::hash<const void *>()(key.second);
  }
};

struct Entry {
  const char *name;  // null: runs Python code
  PyObject *keep;    // strong reference keeping the key's address from being reused
};

// (PyMethodDef*, module/type) -> name: builtin functions and builtin bound
// methods, whose objects are often created per call (`lst.append`).
std::unordered_map<std::pair<const void *, const void *>, Entry, PairHash> method_defs;
// Long-lived callables (descriptors, types, ufuncs, ...) by identity.
std::unordered_map<const void *, Entry> objects;
// Bound the identity cache: callables made per call must not accumulate.
constexpr size_t kMaxObjects = 8192;

std::string attr_string(PyObject *obj, const char *attr) {
  PyObject *value = PyObject_GetAttrString(obj, attr);
  std::string out;
  if (value && PyUnicode_Check(value)) {
    const char *utf8 = PyUnicode_AsUTF8(value);
    if (utf8) out = utf8;
  }
  Py_XDECREF(value);
  PyErr_Clear();
  return out;
}

// "list", "numpy.ndarray", "collections.OrderedDict".
std::string type_name(PyTypeObject *type) {
  auto *obj = reinterpret_cast<PyObject *>(type);
  std::string qualname = attr_string(obj, "__qualname__");
  if (qualname.empty()) qualname = type->tp_name;
  std::string module = attr_string(obj, "__module__");
  if (module.empty() || module == "builtins") return qualname;
  return module + "." + qualname;
}

std::string module_name_of(PyCFunctionObject *fn) {
  if (fn->m_module && PyUnicode_Check(fn->m_module)) {
    const char *utf8 = PyUnicode_AsUTF8(fn->m_module);
    if (utf8) return utf8;
    PyErr_Clear();
  }
  if (fn->m_self && PyModule_Check(fn->m_self)) {
    const char *name = PyModule_GetName(fn->m_self);
    if (name) return name;
    PyErr_Clear();
  }
  return std::string();
}

bool is_python_function(PyObject *obj) {
  if (!obj) return false;
  if (PyFunction_Check(obj)) return true;
  if (Py_IS_TYPE(obj, &PyStaticMethod_Type) || Py_IS_TYPE(obj, &PyClassMethod_Type)) {
    PyObject *func = PyObject_GetAttrString(obj, "__func__");
    bool result = func && PyFunction_Check(func);
    Py_XDECREF(func);
    PyErr_Clear();
    return result;
  }
  return false;
}

PyObject *type_lookup(PyTypeObject *type, const char *name) {
  PyObject *key = PyUnicode_InternFromString(name);
  if (!key) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject *found = _PyType_Lookup(type, key);  // borrowed, no exception
  Py_DECREF(key);
  return found;
}

// A class whose instantiation runs Python code (PY_START covers it).
bool class_runs_python(PyTypeObject *type) {
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  return is_python_function(type_lookup(type, "__init__")) ||
         is_python_function(type_lookup(type, "__new__")) ||
         is_python_function(type_lookup(Py_TYPE(reinterpret_cast<PyObject *>(type)), "__call__"));
}

const char *builtin_name(PyCFunctionObject *fn, PyObject *self) {
  const char *method = fn->m_ml->ml_name;
  if (!self || PyModule_Check(self) || PyCapsule_CheckExact(self)) {
    // Module-level functions; pybind11 keeps its function record in a capsule.
    std::string module = module_name_of(fn);
    if (module.empty() || module == "builtins") return intern(method);
    return intern(module + "." + method);
  }
  PyTypeObject *owner = PyType_Check(self) ? reinterpret_cast<PyTypeObject *>(self) : Py_TYPE(self);
  return intern(type_name(owner) + "." + method);
}

// Name from the object's own __module__/__qualname__ (ufuncs, array-function
// dispatchers, Cython functions, ctypes pointers), else from its type.
const char *generic_name(PyObject *callable) {
  std::string qualname = attr_string(callable, "__qualname__");
  if (qualname.empty()) qualname = attr_string(callable, "__name__");
  if (qualname.empty()) return intern(type_name(Py_TYPE(callable)));
  std::string module = attr_string(callable, "__module__");
  if (module.empty())
    module = attr_string(reinterpret_cast<PyObject *>(Py_TYPE(callable)), "__module__");
  if (module.empty() || module == "builtins") return intern(qualname);
  return intern(module + "." + qualname);
}

bool lookup_method_def(PyObject *callable, PyObject *bound_self, NativeCallable *out) {
  auto *fn = reinterpret_cast<PyCFunctionObject *>(callable);
  PyObject *self = bound_self ? bound_self : fn->m_self;
  PyObject *key_owner;
  if (!self || PyModule_Check(self) || PyType_Check(self)) {
    key_owner = self;
  } else {
    key_owner = reinterpret_cast<PyObject *>(Py_TYPE(self));
  }
  auto key =
      std::make_pair(static_cast<const void *>(fn->m_ml), static_cast<const void *>(key_owner));
  auto it = method_defs.find(key);
  if (it == method_defs.end()) {
    Py_XINCREF(key_owner);
    const char *name =
        builtin_name(fn, bound_self ? reinterpret_cast<PyObject *>(Py_TYPE(bound_self)) : self);
    it = method_defs.emplace(key, Entry{name, key_owner}).first;
  }
  out->name = it->second.name;
  out->identity = callable;
  return true;
}

const char *classify_object(PyObject *callable) {
  PyTypeObject *type = Py_TYPE(callable);
  if (PyType_Check(callable)) {
    auto *cls = reinterpret_cast<PyTypeObject *>(callable);
    return class_runs_python(cls) ? nullptr : intern(type_name(cls));
  }
  if (type == &PyMethodDescr_Type || type == &PyClassMethodDescr_Type ||
      type == &PyWrapperDescr_Type) {
    auto *descr = reinterpret_cast<PyDescrObject *>(callable);
    const char *attr = descr->d_name ? PyUnicode_AsUTF8(descr->d_name) : nullptr;
    if (!attr) {
      PyErr_Clear();
      attr = "?";
    }
    return intern(type_name(descr->d_type) + "." + attr);
  }
  if ((type->tp_flags & Py_TPFLAGS_HEAPTYPE) && is_python_function(type_lookup(type, "__call__"))) {
    return nullptr;  // an instance with a Python __call__
  }
  return generic_name(callable);
}

bool classify(PyObject *callable, NativeCallable *out) {
  if (PyCFunction_Check(callable)) return lookup_method_def(callable, nullptr, out);
  if (PyMethod_Check(callable)) {
    // C_RETURN/C_RAISE name the unwrapped function, not the bound method.
    PyObject *func = PyMethod_GET_FUNCTION(callable);
    if (PyFunction_Check(func)) return false;
    if (PyCFunction_Check(func)) {
      lookup_method_def(func, PyMethod_GET_SELF(callable), out);
      out->identity = func;
      return true;
    }
    if (!classify(func, out)) return false;
    out->identity = func;
    return true;
  }
  auto it = objects.find(callable);
  if (it == objects.end()) {
    const char *name = classify_object(callable);
    if (objects.size() >= kMaxObjects) clear_cache();
    Py_INCREF(callable);
    it = objects.emplace(callable, Entry{name, callable}).first;
  }
  if (!it->second.name) return false;
  out->name = it->second.name;
  out->identity = callable;
  return true;
}

}  // namespace

bool native_slow(PyObject *callable, NativeCallable *out) {
  // Naming may run attribute lookups: never let them disturb the program's
  // exception state.
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  bool result = classify(callable, out);
  PyErr_Restore(exc_type, exc_value, exc_tb);
  return result;
}

void clear_cache() {
  // Move out first: a decref may run code that calls back into us.
  auto old_objects = std::move(objects);
  objects.clear();
  for (auto &[key, entry] : old_objects) Py_XDECREF(entry.keep);
}

}  // namespace pinsight::callables
