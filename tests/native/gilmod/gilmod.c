/* A minimal extension module for tests/integration/test_gil.py: sleep(ms) sleeps with the
 * GIL released (Py_BEGIN/END_ALLOW_THREADS, i.e. PyEval_SaveThread and
 * PyEval_RestoreThread through its GOT). Built with full RELRO (-z now), so its
 * GOT is read-only by the time Python imports it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>

static PyObject *gilmod_sleep(PyObject *self, PyObject *arg) {
  long ms = PyLong_AsLong(arg);
  if (ms < 0 && PyErr_Occurred()) return NULL;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  Py_BEGIN_ALLOW_THREADS
  nanosleep(&ts, NULL);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"sleep", gilmod_sleep, METH_O, "sleep(ms), GIL released"},
                                {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "gilmod", NULL, -1, methods};

PyMODINIT_FUNC PyInit_gilmod(void) { return PyModule_Create(&module); }
