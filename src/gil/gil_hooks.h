// events = gil: native code releasing the GIL and taking it back, seen by
// patching the GOT entries of PyEval_SaveThread / PyEval_RestoreThread
// (Py_BEGIN/END_ALLOW_THREADS) and PyGILState_Ensure / PyGILState_Release in
// the loaded objects that import them (extension modules, the libraries they
// load), and of dlopen in the interpreter's own object, so that an extension
// module imported later is patched as it loads. Never patched: our own
// objects, and calls an object makes to functions it defines itself
// (libpython's internal calls, which are direct). The wrappers call the real
// functions and tell tracer/gil_accounting.
#pragma once

#include <cstddef>
#include <string>

namespace pinsight::gil_hooks {

// Patches every loaded object (GIL held). False with a reason where the
// mechanism does not exist (an ELF relocation model we do not handle).
bool install(std::string *why_not);
// Puts back every entry still holding our wrapper (GIL held).
void uninstall();
bool installed();
// GOT entries patched now.
size_t patched_count();
// In a forked child: the patches are inherited; only our lock is renewed.
void after_fork_child();

}  // namespace pinsight::gil_hooks
