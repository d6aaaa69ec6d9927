// Which callables are native code, and what a user would call them.
//
// CPython's own boundary (C_RETURN/C_RAISE fire for every callable that is
// not a Python function) is the starting point; callables whose call runs
// Python code anyway (Python classes with a Python __init__/__new__,
// instances with a Python __call__, bound methods of Python functions) are
// left to PY_START. PyCFunction_Check alone would miss NumPy ufuncs and
// dispatchers, ctypes function pointers, Cython functions and pybind11 methods.
//
// Names are cached without owning any object of the program (see
// callable_names.cpp): a callable dies when it would untraced, and an object
// later made at its address is named afresh.
#pragma once

#include "common/compat.h"

namespace pinsight::callables {

struct NativeCallable {
  const char *name;      // interned, valid for the life of the process
  const void *identity;  // end_identity() of what C_RETURN/C_RAISE will pass for this call
};

// What a call's end is matched on. A builtin function or method by its
// PyMethodDef, not by the object: CPython's profile hook on 3.12+ passes a
// new bound method object for each event of a call through a method
// descriptor (`g.throw(...)`), so the objects of a call's start and end differ.
inline const void *end_identity(PyObject *callable) {
  if (PyCFunction_Check(callable)) return reinterpret_cast<PyCFunctionObject *>(callable)->m_ml;
  return callable;
}

bool native_slow(PyObject *callable, NativeCallable *out);

// True when calling `callable` runs native code; fills `out`.
inline bool native(PyObject *callable, NativeCallable *out) {
  if (Py_IS_TYPE(callable, &PyFunction_Type)) return false;
  return native_slow(callable, out);
}

}  // namespace pinsight::callables
