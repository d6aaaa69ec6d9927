/*
 * The reference tracer of bench/bench_core.py: a sys.monitoring callback in C
 * that writes the same payload to the same provider and does nothing else
 * (no rate control, no shadow stack, no mode checks, no native-call naming
 * beyond the type name, no code_info: the full payload's file, once per code
 * object). Its cost per event is the floor pinsight-python is measured against.
 *
 * The *_int callbacks write the compact payload's integer events with no
 * naming at all: the cost of an LTTng event of integers, the floor of any
 * payload.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_PROBE_DYNAMIC_LINKAGE
#include "python_pinsight_lttng_ust.h"

#include <dlfcn.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline void emit_function(int begin, PyObject *code_obj, int transition) {
  PyCodeObject *code = (PyCodeObject *)code_obj;
  const char *qualname = PyUnicode_AsUTF8(code->co_qualname);
  if (begin) {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, function_begin, qualname,
                         code->co_firstlineno, (unsigned long)code, 0, transition);
  } else {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, function_end, qualname,
                         code->co_firstlineno, (unsigned long)code, 0, transition);
  }
}

static PyObject *on_start(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  emit_function(1, args[0], 0);
  Py_RETURN_NONE;
}

static PyObject *on_return(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  emit_function(0, args[0], 3);
  Py_RETURN_NONE;
}

static inline void emit_call(int begin, PyObject *const *args, int transition) {
  PyObject *callable = args[2];
  if (PyFunction_Check(callable)) return;
  PyCodeObject *code = (PyCodeObject *)args[0];
  const char *qualname = PyUnicode_AsUTF8(code->co_qualname);
  const char *callee = PyCFunction_Check(callable)
                           ? ((PyCFunctionObject *)callable)->m_ml->ml_name
                           : Py_TYPE(callable)->tp_name;
  if (begin) {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, c_call_begin, qualname, callee,
                         code->co_firstlineno, (unsigned long)code, 0, transition);
  } else {
    lttng_ust_tracepoint(python_pinsight_lttng_ust, c_call_end, qualname, callee,
                         code->co_firstlineno, (unsigned long)code, 0, transition);
  }
}

static PyObject *on_call(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  emit_call(1, args, 0);
  Py_RETURN_NONE;
}

static PyObject *on_c_return(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  emit_call(0, args, 1);
  Py_RETURN_NONE;
}

static PyObject *on_start_int(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_function_begin, (unsigned long)args[0],
                       0, 0);
  Py_RETURN_NONE;
}

static PyObject *on_return_int(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_function_end, (unsigned long)args[0], 0,
                       3);
  Py_RETURN_NONE;
}

static PyObject *on_call_int(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  if (PyFunction_Check(args[2])) Py_RETURN_NONE;
  lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_c_call_begin, (unsigned long)args[0],
                       (unsigned long)Py_TYPE(args[2]), 0, 0, 0);
  Py_RETURN_NONE;
}

static PyObject *on_c_return_int(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  lttng_ust_tracepoint(python_pinsight_lttng_ust, compact_c_call_end, (unsigned long)args[0],
                       (unsigned long)Py_TYPE(args[2]), 0, 0, 1);
  Py_RETURN_NONE;
}

static PyObject *empty(PyObject *self, PyObject *const *args, Py_ssize_t n) { Py_RETURN_NONE; }

/* The floor of a tracer that timestamps: the empty callback plus one read of the
 * cycle counter per record (trace0 and pinsight-python's batched payload each read
 * it once per record), kept in a ring as a tracer would. */
static unsigned long long clock_ring[1024];
static unsigned clock_next;

static inline void read_clock(void) {
#if defined(__x86_64__)
  clock_ring[clock_next++ & 1023] = __rdtsc();
#else
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  clock_ring[clock_next++ & 1023] = (unsigned long long)now.tv_sec * 1000000000ull + now.tv_nsec;
#endif
}

static PyObject *clocked(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  read_clock();
  Py_RETURN_NONE;
}

/* CALL: a record (and a clock read) for native callees only; a Python callee's
 * begin is its PY_START. */
static PyObject *clocked_call(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n >= 3 && !PyFunction_Check(args[2])) read_clock();
  Py_RETURN_NONE;
}

static PyObject *load_provider(PyObject *self, PyObject *path) {
  if (!dlopen(PyUnicode_AsUTF8(path), RTLD_NOW | RTLD_GLOBAL)) {
    PyErr_SetString(PyExc_OSError, dlerror());
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"on_start", (PyCFunction)(void (*)(void))on_start, METH_FASTCALL, NULL},
    {"on_return", (PyCFunction)(void (*)(void))on_return, METH_FASTCALL, NULL},
    {"on_call", (PyCFunction)(void (*)(void))on_call, METH_FASTCALL, NULL},
    {"on_c_return", (PyCFunction)(void (*)(void))on_c_return, METH_FASTCALL, NULL},
    {"on_start_int", (PyCFunction)(void (*)(void))on_start_int, METH_FASTCALL, NULL},
    {"on_return_int", (PyCFunction)(void (*)(void))on_return_int, METH_FASTCALL, NULL},
    {"on_call_int", (PyCFunction)(void (*)(void))on_call_int, METH_FASTCALL, NULL},
    {"on_c_return_int", (PyCFunction)(void (*)(void))on_c_return_int, METH_FASTCALL, NULL},
    {"empty", (PyCFunction)(void (*)(void))empty, METH_FASTCALL, NULL},
    {"clocked", (PyCFunction)(void (*)(void))clocked, METH_FASTCALL, NULL},
    {"clocked_call", (PyCFunction)(void (*)(void))clocked_call, METH_FASTCALL, NULL},
    {"load_provider", load_provider, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_reftracer", NULL, -1, methods};

PyMODINIT_FUNC PyInit__reftracer(void) { return PyModule_Create(&module); }
