// Steps tracing aside while a bdb debugger (pdb, breakpoint(), IDEs built on
// bdb) traces the program, and back when it is done. On CPython 3.12-3.13 a
// debugger's first stop comes one line late while another sys.monitoring tool
// monitors function events; debugging wins over the trace of the debugging.
//
// An audit hook sees every sys.settrace call: one made by bdb steps aside at
// once (before it takes effect, which the first stop needs); after each call,
// a pending call looks at every thread's trace function and resumes tracing
// when no bdb debugger is left. All of it runs with the GIL held.
#pragma once

namespace pinsight::debugger_guard {

struct Actions {
  void (*step_aside)();  // stop tracing, stay activated
  void (*step_back)();   // trace again, as before
};

// Once per process (audit hooks cannot be removed): later calls only re-arm.
void install(Actions actions);
// Forget the debugger (deactivate, a new activation): nothing to step back to.
void disarm();

}  // namespace pinsight::debugger_guard
