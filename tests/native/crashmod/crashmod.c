/* A C extension that faults: the flight recorder's fatal-signal dump
 * (tests/integration/test_flight_recorder.py). crash() writes through a null
 * pointer (SIGSEGV); abort_now() calls abort() (SIGABRT). */
#include <Python.h>
#include <stdlib.h>

static PyObject *crash(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  volatile int *nowhere = NULL;
  *nowhere = 42;
  Py_RETURN_NONE;
}

static PyObject *abort_now(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  abort();
}

static PyMethodDef methods[] = {
    {"crash", crash, METH_NOARGS, "Write through a null pointer (SIGSEGV)."},
    {"abort_now", abort_now, METH_NOARGS, "abort() (SIGABRT)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "crashmod", NULL, -1, methods};

PyMODINIT_FUNC PyInit_crashmod(void) { return PyModule_Create(&module); }
