#include "tracer/callable_names.h"

#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/py_util.h"
#include "emit/event_text.h"

namespace pinsight::callables {
namespace {

// Names never die: records on shadow stacks point at them, and the set of
// distinct names in a program is small. Kept as events carry them (cut past
// event_text::kNameBytes): a name is what c_call and callable_info events say.
std::unordered_set<std::string> &interned_names() {
  static auto *names = new std::unordered_set<std::string>();
  return *names;
}
const char *intern(std::string name) {
  if (name.size() > emitter::event_text::kNameBytes) {
    name = emitter::event_text::cut_middle(name);
  }
  return interned_names().insert(std::move(name)).first->c_str();
}

// ---------------------------------------------------------------------------
// The caches own nothing of the program. Each entry is keyed by addresses
// that stay valid as long as the entry lives:
//  - objects that never die (static types, their descriptors): no guard;
//  - weakly referenceable objects (modules, heap types, partial objects,
//    callable instances, builtin functions): a weak reference whose callback
//    drops every entry keyed by that object when it dies, before its address
//    can be reused;
//  - module globals that cannot be weakly referenced (NumPy ufuncs and
//    dispatchers): the module is guarded, and each hit checks that the
//    module's attribute still is this object.
// Anything else is named again at each call, never kept.

using MethodKey = std::pair<const void *, const void *>;  // (PyMethodDef*, owner)

struct PairHash {
  size_t operator()(const MethodKey &key) const {
    return std::hash<const void *>()(key.first) * 31u ^ std::hash<const void *>()(key.second);
  }
};

struct ObjectEntry {
  const char *name;                 // null: calling it runs Python code
  PyObject *module_dict = nullptr;  // borrowed (its module is guarded); null: no check
  PyObject *attr = nullptr;         // owned str: module_dict[attr] must be the object
};

// (PyMethodDef*, module/type) -> name: builtin functions and builtin bound
// methods, whose objects are often created per call (`lst.append`).
std::unordered_map<MethodKey, const char *, PairHash> method_defs;
// Other callables (types, descriptors, ufuncs, partial objects, ...) by identity.
std::unordered_map<const void *, ObjectEntry> objects;

struct Guard {
  PyObject *weakref = nullptr;  // owned
  std::vector<MethodKey> methods;
  std::vector<const void *> objects;
};
// Guarded object address -> what to forget when it dies.
std::unordered_map<const void *, Guard> guards;
std::unordered_map<const PyObject *, const void *> guard_by_weakref;
// Weak references whose callback ran: released later, never inside their own
// callback.
std::vector<PyObject *> spent_weakrefs;

void forget_object_entry(const void *key) {
  auto it = objects.find(key);
  if (it == objects.end()) return;
  PyObject *attr = it->second.attr;
  objects.erase(it);
  Py_XDECREF(attr);  // a str: runs no code
}

PyObject *on_guarded_death(PyObject *, PyObject *weakref) {
  auto found = guard_by_weakref.find(weakref);
  if (found != guard_by_weakref.end()) {
    const void *address = found->second;
    guard_by_weakref.erase(found);
    auto it = guards.find(address);
    if (it != guards.end()) {
      Guard guard = std::move(it->second);
      guards.erase(it);
      for (const MethodKey &key : guard.methods) method_defs.erase(key);
      for (const void *key : guard.objects) forget_object_entry(key);
      spent_weakrefs.push_back(guard.weakref);
    }
  }
  Py_RETURN_NONE;
}

PyMethodDef on_guarded_death_def = {"_pinsight_forget_callable", on_guarded_death, METH_O, nullptr};

bool immortal(PyObject *obj) {
  return obj == nullptr || (PyType_Check(obj) && !(reinterpret_cast<PyTypeObject *>(obj)->tp_flags &
                                                   Py_TPFLAGS_HEAPTYPE));
}

bool weakly_referenceable(PyObject *obj) { return Py_TYPE(obj)->tp_weaklistoffset != 0; }

// The guard of `obj` (created on first use), or null when `obj` cannot be
// weakly referenced. No Python code runs between a successful return and
// the caller's use of the guard, except on failure paths.
Guard *guard_of(PyObject *obj) {
  auto it = guards.find(obj);
  if (it != guards.end()) return &it->second;
  if (!weakly_referenceable(obj)) return nullptr;
  static PyObject *callback = PyCFunction_New(&on_guarded_death_def, nullptr);
  if (!callback) {
    py::clear_error();
    return nullptr;
  }
  PyObject *weakref = PyWeakref_NewRef(obj, callback);
  if (!weakref) {
    py::clear_error();
    return nullptr;
  }
  compat::hide_from_tracemalloc(weakref);
  // Making the weakref may have run the garbage collector (and our callback
  // for other objects): look the map up again.
  Guard &guard = guards[obj];
  if (guard.weakref) {
    Py_DECREF(weakref);
  } else {
    guard.weakref = weakref;
    guard_by_weakref[weakref] = obj;
  }
  return &guard;
}

// Remembers `name` under `key` for as long as `owner` lives: for good when it
// is immortal, until its guard's callback otherwise; not at all when it can be
// neither (the next call names it again).
void remember_method(const MethodKey &key, PyObject *owner, const char *name) {
  if (immortal(owner)) {
    method_defs[key] = name;
  } else if (Guard *guard = guard_of(owner)) {
    method_defs[key] = name;
    guard->methods.push_back(key);
  }
}

// ---------------------------------------------------------------------------
// Naming.

std::string attr_string(PyObject *obj, const char *attr) {
  PyObject *value = PyObject_GetAttrString(obj, attr);
  std::string out;
  if (value && PyUnicode_Check(value)) {
    const char *utf8 = PyUnicode_AsUTF8(value);
    if (utf8) out = utf8;
  }
  Py_XDECREF(value);
  py::clear_error();
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

std::string qualify(const std::string &module, const std::string &name) {
  if (module.empty() || module == "builtins") return name;
  return module + "." + name;
}

// sys.modules[module] if it is a module (borrowed), else null.
PyObject *loaded_module(const std::string &module) {
  if (module.empty()) return nullptr;
  PyObject *modules = PyImport_GetModuleDict();  // borrowed
  PyObject *found = modules ? PyDict_GetItemString(modules, module.c_str()) : nullptr;
  return found && PyModule_Check(found) ? found : nullptr;
}

// True when `module.attr` is `callable`: the name a user calls it by.
bool exported_as(PyObject *callable, PyObject *module, const char *attr) {
  if (!module || !attr || !*attr) return false;
  PyObject *dict = PyModule_GetDict(module);  // borrowed
  return dict && PyDict_GetItemString(dict, attr) == callable;
}

// pybind11 keeps its function record in m_self: a capsule up to 2.x, an
// object of its own static type since 3.0, whose versioned tp_name is
// "pybind11_builtins.pybind11_detail_function_record_v1_<platform ABI>".
bool is_pybind11_record(PyObject *self) {
  if (!self) return false;
  if (PyCapsule_CheckExact(self)) return true;
  return std::strstr(Py_TYPE(self)->tp_name, "pybind11_detail_function_record_") != nullptr;
}

// The function a class attribute stands for: staticmethod and classmethod
// objects and instancemethod wrappers (pybind11's methods) unwrapped.
PyObject *unwrapped(PyObject *value) {
  if (PyInstanceMethod_Check(value)) return PyInstanceMethod_GET_FUNCTION(value);
  if (Py_IS_TYPE(value, &PyStaticMethod_Type) || Py_IS_TYPE(value, &PyClassMethod_Type)) {
    PyObject *func = PyObject_GetAttrString(value, "__func__");
    if (!func) {
      py::clear_error();
      return nullptr;
    }
    Py_DECREF(func);  // the wrapper keeps it alive
    return func;
  }
  return value;
}

// "Klass.method" for a function found in a class of `module` (and classes
// nested in them), by identity; empty when none holds it.
std::string find_in_classes(PyObject *callable, PyObject *dict, int depth) {
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    if (!PyType_Check(value) || !PyUnicode_Check(key)) continue;
    auto *type = reinterpret_cast<PyTypeObject *>(value);
    PyObject *type_dict = type->tp_dict;  // borrowed
    if (!type_dict) continue;
    Py_ssize_t inner = 0;
    PyObject *attr, *member;
    while (PyDict_Next(type_dict, &inner, &attr, &member)) {
      if (unwrapped(member) == callable && PyUnicode_Check(attr)) {
        const char *name = PyUnicode_AsUTF8(attr);
        if (!name) {
          py::clear_error();
          continue;
        }
        std::string method = name;
        Py_INCREF(value);  // naming looks attributes up: keep the class alive meanwhile
        std::string found = type_name(type) + "." + method;
        Py_DECREF(value);
        return found;
      }
    }
    if (depth > 0) {
      std::string nested = find_in_classes(callable, type_dict, depth - 1);
      if (!nested.empty()) return nested;
    }
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
    py::clear_error();
    return result;
  }
  return false;
}

PyObject *type_lookup(PyTypeObject *type, const char *name) {
  PyObject *key = PyUnicode_InternFromString(name);
  if (!key) {
    py::clear_error();
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

std::string module_name_of(PyCFunctionObject *fn) {
  if (fn->m_module && PyUnicode_Check(fn->m_module)) {
    const char *utf8 = PyUnicode_AsUTF8(fn->m_module);
    if (utf8) return utf8;
    py::clear_error();
  }
  if (fn->m_self && PyModule_Check(fn->m_self)) {
    const char *name = PyModule_GetName(fn->m_self);
    if (name) return name;
    py::clear_error();
  }
  return std::string();
}

// A builtin function or method, named as the user calls it: `math.sqrt`,
// `list.append`, `pbmod.add`, `pbmod.Klass.method`; PyTorch's re-exported
// `torch.relu` rather than its defining class.
const char *builtin_name(PyCFunctionObject *fn, PyObject *self) {
  const char *method = fn->m_ml->ml_name && *fn->m_ml->ml_name ? fn->m_ml->ml_name : "<unnamed>";
  std::string module = module_name_of(fn);
  PyObject *module_object = loaded_module(module);
  auto *callable = reinterpret_cast<PyObject *>(fn);
  if (exported_as(callable, module_object, method)) return intern(qualify(module, method));
  if (!self || PyModule_Check(self) || is_pybind11_record(self)) {
    if (module_object && self && !PyModule_Check(self)) {
      // A pybind11 method or static method looked up on its class.
      std::string found = find_in_classes(callable, PyModule_GetDict(module_object), 1);
      if (!found.empty()) return intern(found);
    }
    return intern(qualify(module, method));
  }
  PyTypeObject *owner = PyType_Check(self) ? reinterpret_cast<PyTypeObject *>(self) : Py_TYPE(self);
  return intern(type_name(owner) + "." + method);
}

// Name from the object's own __module__/__qualname__ (ufuncs, array-function
// dispatchers, Cython functions, ctypes pointers), else from its type.
// `module`/`attr` are set when that name is a module global holding it.
const char *generic_name(PyObject *callable, PyObject **module_out, std::string *attr_out) {
  std::string qualname = attr_string(callable, "__qualname__");
  if (qualname.empty()) qualname = attr_string(callable, "__name__");
  if (qualname.empty()) return intern(type_name(Py_TYPE(callable)));
  std::string module = attr_string(callable, "__module__");
  if (module.empty())
    module = attr_string(reinterpret_cast<PyObject *>(Py_TYPE(callable)), "__module__");
  PyObject *module_object = loaded_module(module);
  if (exported_as(callable, module_object, qualname.c_str())) {
    *module_out = module_object;
    *attr_out = qualname;
  }
  return intern(qualify(module, qualname));
}

bool lookup_method_def(PyObject *callable, PyObject *bound_self, NativeCallable *out) {
  auto *fn = reinterpret_cast<PyCFunctionObject *>(callable);
  PyObject *self = bound_self ? bound_self : fn->m_self;
  if (is_pybind11_record(self)) {
    // Its PyMethodDef lives and dies with the function: key by the function.
    const char *name = nullptr;
    auto it = objects.find(callable);
    if (it != objects.end()) {
      name = it->second.name;
    } else {
      name = builtin_name(fn, self);
      if (Guard *guard = guard_of(callable)) {
        objects[callable] = ObjectEntry{name};
        guard->objects.push_back(callable);
      }
    }
    out->name = name;
    out->identity = end_identity(callable);
    return true;
  }
  PyObject *owner;
  if (!self || PyModule_Check(self) || PyType_Check(self)) {
    owner = self;
  } else {
    owner = reinterpret_cast<PyObject *>(Py_TYPE(self));
  }
  auto key = MethodKey(fn->m_ml, owner);
  auto it = method_defs.find(key);
  const char *name;
  if (it != method_defs.end()) {
    name = it->second;
  } else {
    name = builtin_name(fn, bound_self ? reinterpret_cast<PyObject *>(Py_TYPE(bound_self)) : self);
    remember_method(key, owner, name);
  }
  out->name = name;
  out->identity = end_identity(callable);
  return true;
}

// Instances of a type that gives them no name of their own (attribute lookup
// not overridden, no instance dict, no __qualname__ or __name__ in the MRO) are
// named by their type, as generic_name() would after two failed lookups: each
// failure builds and clears an AttributeError (about 1.7 us per call for an
// operator.itemgetter). Such instances are seldom weakly referenceable, so they
// cannot be cached by identity; the answer is, per type (key: a null
// PyMethodDef; null when the type names its instances), for types that cannot
// change (static or immutable ones).
const char *nameless_instance_name(PyObject *callable) {
  PyTypeObject *type = Py_TYPE(callable);
  if (type->tp_getattro != PyObject_GenericGetAttr || type->tp_dictoffset != 0) return nullptr;
  if ((type->tp_flags & Py_TPFLAGS_HEAPTYPE) && !(type->tp_flags & compat::kImmutableTypeFlag)) {
    return nullptr;
  }
  auto key = MethodKey(nullptr, type);
  auto it = method_defs.find(key);
  if (it != method_defs.end()) return it->second;
  const bool named = type_lookup(type, "__qualname__") || type_lookup(type, "__name__");
  const char *name = named ? nullptr : intern(type_name(type));
  remember_method(key, reinterpret_cast<PyObject *>(type), name);
  return name;
}

// Null: calling it runs Python code. Sets `immortal_out` when the object
// lives as long as the process (static types and their descriptors).
const char *classify_object(PyObject *callable, bool *immortal_out, PyObject **module_out,
                            std::string *attr_out) {
  PyTypeObject *type = Py_TYPE(callable);
  if (PyType_Check(callable)) {
    auto *cls = reinterpret_cast<PyTypeObject *>(callable);
    *immortal_out = immortal(callable);
    return class_runs_python(cls) ? nullptr : intern(type_name(cls));
  }
  if (type == &PyMethodDescr_Type || type == &PyClassMethodDescr_Type ||
      type == &PyWrapperDescr_Type) {
    auto *descr = reinterpret_cast<PyDescrObject *>(callable);
    *immortal_out = immortal(reinterpret_cast<PyObject *>(descr->d_type));
    const char *attr = descr->d_name ? PyUnicode_AsUTF8(descr->d_name) : nullptr;
    if (!attr) {
      py::clear_error();
      attr = "?";
    }
    return intern(type_name(descr->d_type) + "." + attr);
  }
  if ((type->tp_flags & Py_TPFLAGS_HEAPTYPE) && is_python_function(type_lookup(type, "__call__"))) {
    return nullptr;  // an instance with a Python __call__
  }
  if (const char *name = nameless_instance_name(callable)) return name;
  return generic_name(callable, module_out, attr_out);
}

bool cached_object(PyObject *callable, const char **name) {
  auto it = objects.find(callable);
  if (it == objects.end()) return false;
  const ObjectEntry &entry = it->second;
  if (entry.module_dict && PyDict_GetItem(entry.module_dict, entry.attr) != callable) {
    forget_object_entry(callable);  // the global now holds another object
    return false;
  }
  *name = entry.name;
  return true;
}

void remember_object(PyObject *callable, const char *name, bool is_immortal, PyObject *module,
                     const std::string &attr) {
  if (is_immortal) {
    objects[callable] = ObjectEntry{name};
    return;
  }
  if (Guard *guard = guard_of(callable)) {
    objects[callable] = ObjectEntry{name};
    guard->objects.push_back(callable);
    return;
  }
  if (!module) return;
  PyObject *key = PyUnicode_InternFromString(attr.c_str());
  if (!key) {
    py::clear_error();
    return;
  }
  Guard *guard = guard_of(module);
  if (!guard) {
    Py_DECREF(key);
    return;
  }
  forget_object_entry(callable);
  objects[callable] = ObjectEntry{name, PyModule_GetDict(module), key};
  guard->objects.push_back(callable);
}

bool classify(PyObject *callable, NativeCallable *out) {
  if (PyCFunction_Check(callable)) return lookup_method_def(callable, nullptr, out);
  if (PyMethod_Check(callable)) {
    // C_RETURN/C_RAISE name the unwrapped function, not the bound method.
    PyObject *func = PyMethod_GET_FUNCTION(callable);
    if (PyFunction_Check(func)) return false;
    if (PyCFunction_Check(func)) {
      lookup_method_def(func, PyMethod_GET_SELF(callable), out);
      out->identity = end_identity(func);
      return true;
    }
    if (!classify(func, out)) return false;
    out->identity = end_identity(func);
    return true;
  }
  if (PyInstanceMethod_Check(callable)) {
    // pybind11's methods looked up on their class (`Klass.method(obj)`).
    PyObject *func = PyInstanceMethod_GET_FUNCTION(callable);
    if (PyFunction_Check(func) || !classify(func, out)) return false;
    out->identity = callable;
    return true;
  }
  const char *name = nullptr;
  if (!cached_object(callable, &name)) {
    bool is_immortal = false;
    PyObject *module = nullptr;  // borrowed
    std::string attr;
    name = classify_object(callable, &is_immortal, &module, &attr);
    remember_object(callable, name, is_immortal, module, attr);
  }
  if (!name) return false;
  out->name = name;
  out->identity = callable;
  return true;
}

}  // namespace

bool native_slow(PyObject *callable, NativeCallable *out) {
  // Naming may run attribute lookups: never let them disturb the program's
  // exception state.
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  while (!spent_weakrefs.empty()) {
    PyObject *weakref = spent_weakrefs.back();
    spent_weakrefs.pop_back();
    Py_DECREF(weakref);  // dead and callback-less: runs no code
  }
  bool result = classify(callable, out);
  PyErr_Restore(exc_type, exc_value, exc_tb);
  return result;
}

}  // namespace pinsight::callables
