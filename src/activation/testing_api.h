// What the test module (_pinsight_python_testing, a separate shared object)
// may read of the live tracer, published by the product module as the capsule
// pinsight_python._pinsight_python._C_API. A second copy of the tracer in the
// test module would see none of the state the traced program builds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pinsight {

inline constexpr const char *kTestingApiCapsule = "pinsight_python._pinsight_python._C_API";

// One record of a shadow stack; `qualname` lives as long as the record.
struct StackEntryView {
  uintptr_t frame;
  const char *qualname;
  bool c_call;
  int flags;
};

struct TestingApi {
  static constexpr uint32_t kVersion = 3;
  uint32_t version;
  // Calls visit(entry, context) for each record of the calling thread's shadow
  // stack, outermost first (GIL held).
  void (*visit_stack)(void (*visit)(const StackEntryView &entry, void *context), void *context);
  // The calling thread's current Python frame, as an address (GIL held).
  uintptr_t (*current_frame)();
  // Traced generator instances the tracer follows (GeneratorTable; GIL held).
  size_t (*generator_entries)();
  // Whether the calling thread's callbacks read libpython's thread-state
  // variable directly (ThreadState::python_state): 1 yes, 0 no, -1 the thread
  // has had no callback yet.
  int (*python_state_direct)();
};

namespace activation {
// The view above, of this process's tracer: the product module publishes it
// as the capsule kTestingApiCapsule (testing_api.cpp).
const TestingApi &testing_api();
}  // namespace activation

}  // namespace pinsight
