// Small CPython helpers shared by the components; none of them raises.
#pragma once

#include <string>

#include "common/compat.h"

namespace pinsight::py {

// Set when an error we clear is a MemoryError: the allocation that failed was
// the program's to fail (a memory limit, _testcapi.set_nomemory). The
// callbacks then raise MemoryError where the program would have met it,
// instead of swallowing it (tests/core/test_never_hang.py).
// Initial-exec: read by every callback, where the general-dynamic model's
// __tls_get_addr call would cost more than the read.
inline thread_local bool memory_failed __attribute__((tls_model("initial-exec"))) = false;

// Clears the pending error, remembering a MemoryError.
inline void clear_error() {
  if (PyErr_ExceptionMatches(PyExc_MemoryError)) memory_failed = true;
  PyErr_Clear();
}

// Whether an allocation failed since the last call, and forgets it.
inline bool take_memory_failure() {
  if (__builtin_expect(!memory_failed, 1)) return false;  // no store on the hot path
  memory_failed = false;
  return true;
}

// `text` as UTF-8, or `fallback` when it is not a str (error cleared).
inline std::string utf8_or(PyObject *text, const char *fallback) {
  if (text && PyUnicode_Check(text)) {
    Py_ssize_t size = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8) return std::string(utf8, static_cast<size_t>(size));
    clear_error();
  }
  return fallback;
}

// New reference to `object.name`, or null with the error cleared.
inline PyObject *attribute_or_null(PyObject *object, const char *name) {
  PyObject *value = PyObject_GetAttrString(object, name);
  if (!value) clear_error();
  return value;
}

// The pending Python error as text, cleared.
inline std::string fetch_error() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  std::string text = "unknown error";
  if (value) {
    PyObject *str = PyObject_Str(value);
    text = utf8_or(str, text.c_str());
    Py_XDECREF(str);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
  return text;
}

}  // namespace pinsight::py
