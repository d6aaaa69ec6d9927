// A small pybind11 module for the callee-name tests: module functions, an
// overloaded function, a class with methods and a static method, and a native
// function re-exported under another name, as PyTorch does (`torch.relu` is
// `torch._C._VariableFunctionsClass.relu` with __module__ set to "torch").
#include <pybind11/pybind11.h>

#include <string>

namespace py = pybind11;

namespace {

int add(int a, int b) { return a + b; }
int twice(int x) { return 2 * x; }
std::string twice_text(const std::string &s) { return s + s; }

struct Klass {
  int value = 0;
  int method(int x) { return value + x; }
  static int smethod(int x) { return x + 100; }
};

// A static method of a native class that the package re-exports at its top
// level (see pbpkg/__init__.py in the test).
PyObject *relu(PyObject *, PyObject *arg) {
  long x = PyLong_AsLong(arg);
  if (x == -1 && PyErr_Occurred()) return nullptr;
  return PyLong_FromLong(x > 0 ? x : 0);
}

PyMethodDef functions_methods[] = {
    {"relu", relu, METH_O | METH_STATIC, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot functions_slots[] = {
    {Py_tp_methods, functions_methods},
    {0, nullptr},
};

PyType_Spec functions_spec = {"pbmod._FunctionsClass", 0, 0, Py_TPFLAGS_DEFAULT, functions_slots};

}  // namespace

PYBIND11_MODULE(pbmod, m) {
  m.def("add", &add);
  m.def("overloaded", &twice);
  m.def("overloaded", &twice_text);
  py::class_<Klass>(m, "Klass")
      .def(py::init<>())
      .def("method", &Klass::method)
      .def_static("smethod", &Klass::smethod);
  m.def("pybind11_version", [] { return std::string(PYBIND11_VERSION_MAJOR == 3 ? "3" : "other"); });
  PyObject *functions = PyType_FromSpec(&functions_spec);
  if (!functions) throw py::error_already_set();
  m.add_object("_FunctionsClass", py::reinterpret_steal<py::object>(functions));
}
