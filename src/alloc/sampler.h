// Sampled allocations: every allocation of Python's allocators (PyMem hooks on
// the three domains, wrapping the allocators in place) and, when the preload
// library is loaded (pinsight-python trace --alloc), of malloc from native
// code. Sampling is by bytes, with exponentially distributed intervals of a
// given mean per thread (as tcmalloc and memray sample): each sample stands for
// size / P(sampled) bytes, so sums estimate the bytes allocated without
// favouring small or large blocks.
//
// The hooks run on any thread, with or without the GIL: they never take it,
// never call into Python, and are re-entrance-safe (a thread-local guard:
// what the sampler and LTTng allocate, and the malloc beneath PyMem_RawMalloc,
// is not sampled again). A sample names the innermost Python function of the
// allocating thread from that thread's own shadow stack: no frame walking.
#pragma once

#include <cstdint>

namespace pinsight::alloc {

// GIL held. Installs the hooks on first use and starts sampling with this
// mean interval (bytes); hooks stay in place afterwards, passing through while
// sampling is off.
void start(uint64_t mean_interval);
void stop();
// The program is ending (atexit): frees stop being reported too, so blocks
// still alive now count as never freed, not as freed by interpreter teardown.
void finish();
bool active();
// The calling thread is the tracer's (the control thread): what it allocates
// is not sampled; frees of sampled blocks are still seen.
void ignore_calling_thread();
// The preload library registered its malloc/free hooks.
bool native_hooked();
// Samples taken (all threads) since the process started.
uint64_t samples_taken();

}  // namespace pinsight::alloc
