/*
 * omp_kernel: a CPython extension whose OpenMP kernels trace themselves with
 * their own LTTng-UST provider (pinsight_test_omp, omp_kernel_tp.h), built by
 * tests/integration/test_native_correlation.py.
 *
 * Every thread of the team emits region_begin, one chunk per chunk of the
 * iteration space it runs, and region_end. Build (the test does this):
 *   gcc -shared -fPIC -fopenmp -I<python include> -I<this dir> omp_kernel.c \
 *       -o omp_kernel$(EXT_SUFFIX) -llttng-ust -ldl
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <omp.h>
#include <stdlib.h>

/* The provider lives in the extension itself: simplest for a test. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "omp_kernel_tp.h"

/* Fixed chunk size: the number of chunk events per call is exact. */
#define CHUNK 25000L

/* Incremented with the GIL held, so unique per call. */
static unsigned long next_region_id = 1;

static double run_region(const char *kernel, unsigned long region, long n, double a, int is_dot,
                         const double *x, double *y) {
  double total = 0.0;
  const long nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel reduction(+ : total)
  {
    const int tid = omp_get_thread_num();
    const int nth = omp_get_num_threads();
    lttng_ust_tracepoint(pinsight_test_omp, region_begin, kernel, region, tid, nth);
    /* schedule(static, 1): chunk c runs on thread c % nth, whatever the timing. */
#pragma omp for schedule(static, 1)
    for (long c = 0; c < nchunks; c++) {
      const long lo = c * CHUNK;
      const long hi = lo + CHUNK < n ? lo + CHUNK : n;
      lttng_ust_tracepoint(pinsight_test_omp, chunk, kernel, region, tid, lo, hi);
      for (long i = lo; i < hi; i++) {
        if (is_dot) {
          total += x[i] * y[i];
        } else {
          y[i] = a * x[i] + y[i];
          total += y[i];
        }
      }
    }
    /* After the loop's barrier: every thread's chunks precede every region_end. */
    lttng_ust_tracepoint(pinsight_test_omp, region_end, kernel, region, tid, nth);
  }
  return total;
}

static PyObject *run_kernel(const char *kernel, long n, double a, int is_dot) {
  if (n <= 0) {
    PyErr_SetString(PyExc_ValueError, "n must be positive");
    return NULL;
  }
  double *x = malloc((size_t)n * sizeof(double));
  double *y = malloc((size_t)n * sizeof(double));
  if (!x || !y) {
    free(x);
    free(y);
    return PyErr_NoMemory();
  }
  for (long i = 0; i < n; i++) {
    x[i] = (double)(i % 7);
    y[i] = 1.0;
  }
  const unsigned long region = next_region_id++;
  double total;
  /* Like any real kernel: the parallel work runs without the GIL. */
  Py_BEGIN_ALLOW_THREADS
  total = run_region(kernel, region, n, a, is_dot, x, y);
  Py_END_ALLOW_THREADS
  free(x);
  free(y);
  return PyFloat_FromDouble(total);
}

/* saxpy(n, a): y = a*x + y over n elements; returns sum(y). */
static PyObject *saxpy(PyObject *self, PyObject *args) {
  (void)self;
  long n;
  double a;
  if (!PyArg_ParseTuple(args, "ld", &n, &a)) return NULL;
  return run_kernel("saxpy", n, a, 0);
}

/* dot(n): sum(x*y) over n elements. */
static PyObject *dot(PyObject *self, PyObject *args) {
  (void)self;
  long n;
  if (!PyArg_ParseTuple(args, "l", &n)) return NULL;
  return run_kernel("dot", n, 0.0, 1);
}

static PyMethodDef methods[] = {
    {"saxpy", saxpy, METH_VARARGS, "saxpy(n, a): y = a*x + y in an OpenMP region; sum(y)."},
    {"dot", dot, METH_VARARGS, "dot(n): sum(x*y) in an OpenMP region."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "omp_kernel", "OpenMP kernels with their own LTTng-UST tracepoints.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_omp_kernel(void) { return PyModule_Create(&module); }
