#include "tracer/thread_state.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_set>

#include "tracer/tracer.h"

namespace pinsight::thread_states {

__thread ThreadState *current_ptr __attribute__((tls_model("initial-exec"))) = nullptr;
std::atomic<ThreadState *> gil_holder{nullptr};

namespace {
std::atomic<int> live_threads{0};
std::atomic<int> next_thread_id{1};
std::atomic<unsigned long> main_thread_ident{0};
std::atomic<void (*)()> last_thread_exit_hook{nullptr};

// Every live ThreadState; threads exit without the GIL, hence the mutex.
std::mutex registry_mutex;
std::unordered_set<ThreadState *> *&registry_storage() {
  static auto *states = new std::unordered_set<ThreadState *>();
  return states;
}
std::unordered_set<ThreadState *> &registry() { return *registry_storage(); }

// Owns the thread's state; its destructor runs when the OS thread exits,
// after the thread's Python state is gone: it must not touch Python objects.
struct Owner {
  std::unique_ptr<ThreadState> state;
  ~Owner() {
    if (state) {
      {
        std::lock_guard<std::mutex> lock(registry_mutex);
        registry().erase(state.get());
      }
      current_ptr = nullptr;
      gil_accounting::thread_exited(state.get());
      // The last thread that ran Python code: activation looks whether the
      // program has any thread left (a child forked from a thread).
      if (live_threads.fetch_sub(1, std::memory_order_relaxed) == 1) {
        if (auto hook = last_thread_exit_hook.load()) hook();
      }
    }
  }
};
thread_local Owner owner;
}  // namespace

void set_last_thread_exit_hook(void (*hook)()) { last_thread_exit_hook.store(hook); }

int live_count() { return live_threads.load(std::memory_order_relaxed); }

void set_main_thread(unsigned long main_ident) {
  main_thread_ident.store(main_ident, std::memory_order_relaxed);
}

// Where libpython keeps the calling thread's PyThreadState, found by reading
// the instructions of the function compat::thread_state() calls: the
// general-dynamic TLS sequence of a shared libpython (`lea tls_index(%rip),%rdi;
// call __tls_get_addr`) or the local-exec load of one linked into the
// executable (`mov %fs:offset,%rax`). Anything else, or a slot whose value is
// not what the function returns (checked on each thread), leaves it null.
#if defined(__x86_64__) && defined(__linux__) && PINSIGHT_CPYTHON_VERIFIED && \
    PY_VERSION_HEX >= 0x030C0000
extern "C" void *__tls_get_addr(void *);

namespace {
const uint8_t *python_state_code() {
#if PY_VERSION_HEX >= 0x030D0000
  return reinterpret_cast<const uint8_t *>(&PyThreadState_GetUnchecked);
#else
  return reinterpret_cast<const uint8_t *>(&_PyThreadState_UncheckedGet);
#endif
}

PyThreadState *const *python_state_slot() {
  const uint8_t *code = python_state_code();
  static const uint8_t kGeneralDynamic[] = {0x66, 0x48, 0x8d, 0x3d};   // data16 lea X(%rip),%rdi
  static const uint8_t kTlsCall[] = {0x66, 0x66, 0x48, 0xe8};          // data16 data16 rex.W call
  static const uint8_t kLocalExec[] = {0x64, 0x48, 0x8b, 0x04, 0x25};  // mov %fs:X,%rax
  // The sequence starts within the function's first instructions (after a
  // stack adjustment or an endbr64).
  for (int at = 0; at <= 8; ++at) {
    const uint8_t *p = code + at;
    if (std::memcmp(p, kGeneralDynamic, 4) == 0 && std::memcmp(p + 8, kTlsCall, 4) == 0) {
      int32_t displacement;
      std::memcpy(&displacement, p + 4, 4);
      return static_cast<PyThreadState *const *>(
          __tls_get_addr(const_cast<uint8_t *>(p + 8 + displacement)));
    }
    if (std::memcmp(p, kLocalExec, 5) == 0) {
      int32_t offset;
      std::memcpy(&offset, p + 5, 4);
      char *thread_pointer;
      asm("mov %%fs:0, %0" : "=r"(thread_pointer));
      return reinterpret_cast<PyThreadState *const *>(thread_pointer + offset);
    }
  }
  return nullptr;
}
}  // namespace
#else
namespace {
PyThreadState *const *python_state_slot() { return nullptr; }
}  // namespace
#endif

ThreadState *create_current() {
  auto state = std::make_unique<ThreadState>();
  state->thread_ident = PyThread_get_thread_ident();
  state->python_thread_id = state->thread_ident == main_thread_ident.load(std::memory_order_relaxed)
                                ? 0
                                : next_thread_id.fetch_add(1, std::memory_order_relaxed);
  state->tid = static_cast<int>(syscall(SYS_gettid));
  state->stack.reserve(64);
  PyThreadState *const *slot = python_state_slot();
  PyThreadState *tstate = compat::thread_state();
  if (slot && tstate && *slot == tstate) state->python_state = slot;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().insert(state.get());
  }
  owner.state = std::move(state);
  current_ptr = owner.state.get();
  live_threads.fetch_add(1, std::memory_order_relaxed);
  Tracer::instance().on_new_thread(*current_ptr);
  return current_ptr;
}

}  // namespace pinsight::thread_states

namespace pinsight::thread_states {
void clear_all_stacks() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (ThreadState *state : registry()) {
    state->stack.clear();
    state->task_steps.clear();
    state->continuing_task = 0;
  }
}

void with_thread(int python_thread_id, const std::function<void(ThreadState &)> &fn) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (ThreadState *state : registry()) {
    if (state->python_thread_id == python_thread_id) {
      fn(*state);
      return;
    }
  }
}

void for_each(const std::function<void(ThreadState &)> &fn) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (ThreadState *state : registry()) fn(*state);
}

bool try_for_each(void (*fn)(ThreadState &, void *), void *context) {
  if (!registry_mutex.try_lock()) return false;
  for (ThreadState *state : registry()) fn(*state, context);
  registry_mutex.unlock();
  return true;
}

void forget_code(const CodeInfo &code, CodeInfo &replacement) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (ThreadState *state : registry()) {
    for (FrameRecord &record : state->stack) {
      if (record.code != &code) continue;
      record.code = &replacement;
      record.flags = 0;
      if (record.kind == RecordKind::Function) ++replacement.open_records;
    }
  }
}
}  // namespace pinsight::thread_states

namespace pinsight::thread_states {
void forked_child() {
  if (ThreadState *self = current_ptr) {
    for (FrameRecord &record : self->stack) {
      record.flags &= static_cast<uint16_t>(~(kBeginEmitted | kEmitEnd | kImportEmitted));
    }
    self->task_steps.clear();  // the parent's steps: their ends are not the child's
  }
  // Only the forking thread exists in the child. Another thread may have held
  // the registry's mutex at the fork: start a new one, and a registry of this
  // thread alone (the other threads' states are left, unreachable).
  new (&registry_mutex) std::mutex();
  auto *states = new std::unordered_set<ThreadState *>();
  if (current_ptr) states->insert(current_ptr);
  registry_storage() = states;
  live_threads.store(current_ptr ? 1 : 0, std::memory_order_relaxed);
}
}  // namespace pinsight::thread_states
