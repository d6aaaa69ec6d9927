// events = gil: gil_switch (a thread switched in; its off-CPU time since its
// previous gil event was a wait for the GIL, or, inside a native call, the
// call's own release) and gil_released (native code released the GIL and took
// it back). Per thread: waits and released time; per function: the waits while
// it was the innermost Python frame; per native callee: its releases. To the
// replay's output, each thread's GIL states over time.
#pragma once

#include <cstdint>

#include "raw_event.h"
#include "replay_output.h"
#include "symbol_table.h"

namespace pinsight_reader {

struct ThreadState;

// Where a thread's time went with respect to the GIL.
struct GilStats {
  bool seen = false;               // the thread has gil events
  uint64_t switch_wait_ns = 0;     // waits at hand-offs (gil_switch; gil_released's before_ns)
  uint64_t take_back_wait_ns = 0;  // waits to take the GIL back after a release
  uint64_t released_ns = 0;        // native code ran with the GIL released
  uint64_t switches = 0;           // gil_switch events
  uint64_t releases = 0;           // gil_released events
  uint64_t mark_ns = 0;            // output: GIL states given up to here
};
// Per native callee (the innermost open native call at the event), or kNoSymbol.
struct GilReleaseStats {
  uint64_t count = 0;
  uint64_t released_ns = 0;
  uint64_t wait_ns = 0;  // waiting to take the GIL back
};

// A gil event of thread `t`, whose stack is as the replay has it at the event.
void gil_event(ThreadState &t, const RawEvent &e, const SymbolTable &symbols, ReplayOutput *output);
// The end of the trace: the thread held the GIL from its last gil event on.
void gil_finish(ThreadState &t, ReplayOutput *output);

}  // namespace pinsight_reader
