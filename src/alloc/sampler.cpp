#include "alloc/sampler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <unordered_map>

#include "alloc/preload_api.h"
#include "common/compat.h"
#include "emit/emitter.h"
#include "tracer/thread_state.h"

namespace pinsight::alloc {
namespace {

// alloc_source of the provider.
using wire::kNative;
using wire::kPythonMem;
using wire::kPythonObject;
using wire::kPythonRaw;

// Per thread, plain data in static TLS: valid from the thread's first
// instruction to its last, whatever runs (malloc in thread start-up and exit).
struct ThreadSampler {
  int64_t countdown;  // bytes left before the next sample
  uint64_t rng;       // xorshift64*; 0 until seeded
  uint32_t guard;     // > 0: inside a hook (or the sampler): pass through
  bool tracer_owned;  // the tracer's own thread: its allocations are not the program's
};
__thread ThreadSampler tls __attribute__((tls_model("initial-exec")));

std::atomic<bool> sampling{false};
std::atomic<bool> finished{false};
std::atomic<uint64_t> mean_bytes{512 * 1024};
std::atomic<uint64_t> taken{0};

// ---- the sampled blocks still alive ----
// Every free first tests one bit of an 8 KiB bitmap (lock-free, stays in L1):
// only addresses whose slot holds a sampled block look into the table. The
// per-slot counts behind the bits, and the table, change under the lock; the
// table grows as needed.
constexpr size_t kFilterBits = 16;
constexpr size_t kSlots = size_t{1} << kFilterBits;
std::atomic<uint64_t> filter_bits[kSlots / 64];
uint16_t filter_counts[kSlots];  // table_mutex
std::atomic<size_t> live{0};
std::mutex table_mutex;
std::unordered_map<uintptr_t, uint64_t> &table() {
  static auto *blocks = new std::unordered_map<uintptr_t, uint64_t>();  // never destroyed
  return *blocks;
}

inline size_t slot_of(const void *address) {
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(address) >> 4) * 0x9E3779B97F4A7C15ULL >>
                             (64 - kFilterBits));
}

inline bool maybe_sampled(const void *address) {
  size_t slot = slot_of(address);
  return (filter_bits[slot / 64].load(std::memory_order_relaxed) >> (slot % 64)) & 1;
}

// table_mutex held.
void filter_add(size_t slot) {
  if (filter_counts[slot]++ == 0) {
    filter_bits[slot / 64].fetch_or(uint64_t{1} << (slot % 64), std::memory_order_relaxed);
  }
}
void filter_remove(size_t slot) {
  if (--filter_counts[slot] == 0) {
    filter_bits[slot / 64].fetch_and(~(uint64_t{1} << (slot % 64)), std::memory_order_relaxed);
  }
}

// ---- random intervals ----
inline uint64_t next_random() {
  uint64_t x = tls.rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  tls.rng = x;
  return x * 0x2545F4914F6CDD1DULL;
}

// An exponential interval of mean `mean`: points of a Poisson process on the
// stream of allocated bytes, so a block of size s is sampled with probability
// 1 - exp(-s / mean) whatever came before it.
inline int64_t draw_interval(uint64_t mean) {
  double u = (static_cast<double>(next_random() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  double bytes = -std::log(u) * static_cast<double>(mean);
  return bytes >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(bytes) + 1;
}

void seed_thread() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t seed = static_cast<uint64_t>(now.tv_nsec) ^ (static_cast<uint64_t>(now.tv_sec) << 32) ^
                  reinterpret_cast<uintptr_t>(&tls);
  tls.rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
  tls.countdown = draw_interval(mean_bytes.load(std::memory_order_relaxed));
}

void forget(void *address) {
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    auto it = table().find(reinterpret_cast<uintptr_t>(address));
    if (it == table().end()) return;
    table().erase(it);
    filter_remove(slot_of(address));
  }
  live.fetch_sub(1, std::memory_order_relaxed);
  emitter::free_sample(address);
}

// Guard held. `size` crossed the countdown: take the sample.
void take_sample(void *address, size_t size, int source) {
  uint64_t mean = mean_bytes.load(std::memory_order_relaxed);
  // The countdown restarts at the end of this block (memoryless).
  tls.countdown = draw_interval(mean);
  double p = -std::expm1(-static_cast<double>(size) / static_cast<double>(mean));
  auto weight = static_cast<uint64_t>(p > 0 ? static_cast<double>(size) / p + 0.5 : mean);
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    auto [it, inserted] = table().try_emplace(reinterpret_cast<uintptr_t>(address), weight);
    if (!inserted) {
      it->second = weight;  // its free was not seen (a path we do not hook)
    } else if (filter_counts[slot_of(address)] < UINT16_MAX) {
      filter_add(slot_of(address));
      live.fetch_add(1, std::memory_order_relaxed);
    } else {
      table().erase(it);  // 65535 live samples in one slot: drop this one
    }
  }
  taken.fetch_add(1, std::memory_order_relaxed);
  // The allocating thread's own shadow stack: this thread's frames only.
  // (No empty strings: Babeltrace 2.0.4 reads one as the field's previous value.)
  const char *qualname = "<no Python frame>";
  const char *filename = "<none>";
  int lineno = 0;
  unsigned long code_id = 0;
  int python_thread_id = -1;
  if (const ThreadState *state = thread_states::current_ptr) {
    python_thread_id = state->python_thread_id;
    if (!state->stack.empty()) {
      const FrameRecord &top = state->stack.back();
      const CodeInfo &code = *top.code;
      qualname = code.names.event_qualname();
      filename = code.names.event_filename();
      // Always the definition line, inside a native call too: with qualname
      // and filename it names the function, and readers group by it.
      lineno = code.lineno;
      code_id = reinterpret_cast<unsigned long>(code.code);
    }
  }
  emitter::alloc_sample(address, size, weight, qualname, filename, lineno, code_id,
                        python_thread_id, source);
}

// Guard held.
inline void on_alloc(void *address, size_t size, int source) {
  if (!address || tls.tracer_owned || !sampling.load(std::memory_order_relaxed)) return;
  tls.countdown -= static_cast<int64_t>(size);
  if (tls.countdown > 0) return;
  if (tls.rng == 0) {
    seed_thread();
    tls.countdown -= static_cast<int64_t>(size);
    if (tls.countdown > 0) return;
  }
  take_sample(address, size, source);
}

// Guard held.
inline void on_free(void *address) {
  if (!address || live.load(std::memory_order_relaxed) == 0) return;
  if (finished.load(std::memory_order_relaxed)) return;
  if (maybe_sampled(address)) forget(address);
}

// ---- Python's allocators: one wrapper per domain around what was there ----
struct Domain {
  PyMemAllocatorDomain domain;
  int source;
  PyMemAllocatorEx original;
  PyMemAllocatorEx ours;
  bool installed;
};
Domain domains[] = {
    {PYMEM_DOMAIN_RAW, kPythonRaw, {}, {}, false},
    {PYMEM_DOMAIN_MEM, kPythonMem, {}, {}, false},
    {PYMEM_DOMAIN_OBJ, kPythonObject, {}, {}, false},
};

void *py_malloc(void *ctx, size_t size) {
  auto *d = static_cast<Domain *>(ctx);
  if (tls.guard) return d->original.malloc(d->original.ctx, size);
  ++tls.guard;
  void *address = d->original.malloc(d->original.ctx, size);
  on_alloc(address, size, d->source);
  --tls.guard;
  return address;
}

void *py_calloc(void *ctx, size_t count, size_t size) {
  auto *d = static_cast<Domain *>(ctx);
  if (tls.guard) return d->original.calloc(d->original.ctx, count, size);
  ++tls.guard;
  void *address = d->original.calloc(d->original.ctx, count, size);
  on_alloc(address, count * size, d->source);
  --tls.guard;
  return address;
}

void *py_realloc(void *ctx, void *old, size_t size) {
  auto *d = static_cast<Domain *>(ctx);
  if (tls.guard) return d->original.realloc(d->original.ctx, old, size);
  ++tls.guard;
  on_free(old);  // before the block can move and its address be reused
  void *address = d->original.realloc(d->original.ctx, old, size);
  on_alloc(address, size, d->source);
  --tls.guard;
  return address;
}

void py_free(void *ctx, void *address) {
  auto *d = static_cast<Domain *>(ctx);
  // The hot path: no guard to take, unless this block may have been sampled.
  if (!tls.guard && live.load(std::memory_order_relaxed) != 0 && maybe_sampled(address)) {
    ++tls.guard;
    on_free(address);
    --tls.guard;
  }
  d->original.free(d->original.ctx, address);
}

// ---- malloc from native code, through the preload library ----
void native_alloc(void *address, size_t size) {
  if (tls.guard) return;
  ++tls.guard;
  on_alloc(address, size, kNative);
  --tls.guard;
}

void native_free(void *address) {
  if (tls.guard) return;
  ++tls.guard;
  on_free(address);
  --tls.guard;
}

bool native = false;

// A fork while another thread holds the table's lock would leave the child
// unable to free a sampled block: hold it across fork(). The forking thread
// samples nothing meanwhile (other fork handlers may allocate).
void before_fork() {
  ++tls.guard;
  table_mutex.lock();
}
void after_fork() {
  table_mutex.unlock();
  --tls.guard;
}

void install() {
  static bool done = false;
  if (done) return;
  done = true;
  pthread_atfork(before_fork, after_fork, after_fork);
  for (Domain &d : domains) {
    PyMem_GetAllocator(d.domain, &d.original);
    d.ours = {&d, py_malloc, py_calloc, py_realloc, py_free};
    PyMem_SetAllocator(d.domain, &d.ours);
    d.installed = true;
  }
  auto set_hooks = reinterpret_cast<void (*)(pinsight_alloc_hook, pinsight_free_hook)>(
      dlsym(RTLD_DEFAULT, PINSIGHT_ALLOC_SET_HOOKS_SYMBOL));
  if (set_hooks) {
    set_hooks(native_alloc, native_free);
    native = true;
  }
}

}  // namespace

void start(uint64_t mean_interval) {
  mean_bytes.store(mean_interval ? mean_interval : 1, std::memory_order_relaxed);
  install();
  sampling.store(true, std::memory_order_relaxed);
}

void stop() { sampling.store(false, std::memory_order_relaxed); }

void finish() {
  sampling.store(false, std::memory_order_relaxed);
  finished.store(true, std::memory_order_relaxed);
}

bool active() { return sampling.load(std::memory_order_relaxed); }

void ignore_calling_thread() { tls.tracer_owned = true; }

bool native_hooked() { return native; }

uint64_t samples_taken() { return taken.load(std::memory_order_relaxed); }

}  // namespace pinsight::alloc
