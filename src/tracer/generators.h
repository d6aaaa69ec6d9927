// Traced generator, coroutine and async-generator instances between their
// first yield and their end, keyed by frame; at the end, generator_end gives
// the instance's lifetime (first start to final end). A frame's address is reused as
// soon as its generator dies, and a generator can die suspended without any
// event (collected, or closed where no handler runs): each entry therefore
// holds a weak reference to its generator, whose callback removes the entry
// when the generator dies. So no entry outlives its instance, none is taken
// for another instance at the same address, and none outlives the CodeInfo it
// names (the generator keeps its code alive). All of it runs with the GIL.
#pragma once

#include <cstdint>
#include <string>

#include "common/compat.h"
#include "tracer/code_info.h"
#include "tracer/pointer_map.h"

namespace pinsight {

class GeneratorTable {
 public:
  struct Entry {
    CodeInfo *code;
    PyObject *weakref;    // owned; its callback erases the entry
    uint64_t started_ns;  // its first start (steady clock); 0: not seen (running at activate)
    uint32_t segments;    // segments run so far (its start's, and one per resumption)
    uint8_t flags;        // the record flags the instance resumes with
    bool running;         // resumed: its record is on a shadow stack
  };

  // Finds where this CPython keeps a generator's frame (activate, GIL held).
  static bool init(std::string *error);

  bool empty() const { return by_frame_.empty(); }
  size_t size() const { return by_frame_.size(); }

  // A traced instance yields at `frame`: its later resumptions keep its
  // decision. `started_ns` is when its first segment began (first yield only).
  // False when its generator cannot be named (no entry then: its later
  // segments go untraced, and the trace stays balanced).
  bool suspend(const void *frame, CodeInfo &code, uint8_t flags, uint64_t started_ns);
  // The traced instance at `frame` resumes: its flags, or false when the
  // frame is not a traced instance.
  bool resume(const void *frame, uint8_t *flags);
  // The running instance at `frame` ended (returned or unwound, `how`):
  // generator_end gives its lifetime, on `python_thread_id`.
  void finish(const void *frame, int python_thread_id, int how);
  // Forgets every entry (deactivate, internal failure).
  void clear();
  // Entries naming `code`, which is dying: none should exist (a generator
  // keeps its code alive), but none may outlive it.
  void forget_code(const CodeInfo &code);
  // The weak references' callback: the generator behind `weakref` is dying.
  void generator_died(PyObject *weakref);

 private:
  // Removes the entry by_frame_.find() returned.
  void erase(Entry *found);
  // Removes every entry for which keep(entry) is false.
  template <typename Keep>
  void erase_unless(Keep keep);

  PointerMap<Entry> by_frame_;
  PointerMap<const void *> by_weakref_;
};

// The Tracer's table (the weak references' callback finds it here).
GeneratorTable &generator_table();

// The generator, coroutine or async generator whose frame is `frame` (borrowed),
// or null. Asked only for frames of generator code.
PyObject *generator_of_frame(const void *frame);

// The clock of instance lifetimes (CLOCK_MONOTONIC, as LTTng's).
uint64_t lifetime_clock_ns();

}  // namespace pinsight
