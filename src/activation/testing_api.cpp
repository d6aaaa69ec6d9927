// The test module's view of the live tracer (testing_api.h), kept here so that
// the product module, which publishes it, calls activation only.
#include "activation/testing_api.h"

#include "common/compat.h"
#include "tracer/generators.h"
#include "tracer/thread_state.h"

namespace pinsight::activation {
namespace {

void visit_stack(void (*visit)(const StackEntryView &, void *), void *context) {
  const ThreadState *state = thread_states::current_ptr;
  if (!state) return;
  for (const auto &r : state->stack) {
    const StackEntryView entry = {reinterpret_cast<uintptr_t>(r.frame),
                                  r.code ? r.code->names.qualname().c_str() : "",
                                  r.kind == RecordKind::CCall, static_cast<int>(r.flags)};
    visit(entry, context);
  }
}

uintptr_t current_frame() {
  return reinterpret_cast<uintptr_t>(compat::current_frame(compat::thread_state()));
}

size_t generator_entries() { return generator_table().size(); }

int python_state_direct() {
  const ThreadState *state = thread_states::current_ptr;
  return state ? state->python_state != nullptr : -1;
}

}  // namespace

const TestingApi &testing_api() {
  static const TestingApi api = {TestingApi::kVersion, &visit_stack, &current_frame,
                                 &generator_entries, &python_state_direct};
  return api;
}

}  // namespace pinsight::activation
