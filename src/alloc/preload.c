/*
 * libpinsight_alloc_preload.so: LD_PRELOAD'ed by `pinsight-python trace
 * --alloc` so that malloc from native code (C extensions, NumPy, drivers) can
 * be sampled. It only forwards to the next malloc (libc's, or another
 * interposer's) and calls the hooks pinsight-python registers once it samples
 * allocations; until then, and in programs that never load pinsight-python,
 * it costs one predictable branch per call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "preload_api.h"

#define EXPORT __attribute__((visibility("default")))

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);
static void *(*next_aligned_alloc)(size_t, size_t);
static void *(*next_memalign)(size_t, size_t);
static void *(*next_valloc)(size_t);
static void *(*next_pvalloc)(size_t);

static _Atomic(pinsight_alloc_hook) alloc_hook;
static _Atomic(pinsight_free_hook) free_hook;

/* dlsym may allocate (calloc) while the next functions are being found:
   those few early blocks come from here and are never freed. */
static _Alignas(16) char bootstrap[8192];
static size_t bootstrap_used;
static int resolving;

static int from_bootstrap(const void *p) {
  return (const char *)p >= bootstrap && (const char *)p < bootstrap + sizeof bootstrap;
}

static void *bootstrap_alloc(size_t size) {
  size_t start = (bootstrap_used + 15) & ~(size_t)15;
  if (start + size > sizeof bootstrap) return NULL;
  bootstrap_used = start + size;
  return bootstrap + start;
}

static void resolve(void) {
  if (next_malloc || resolving) return;
  resolving = 1;
  next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  next_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  next_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  next_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  next_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  next_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  resolving = 0;
}

static inline void allocated(void *p, size_t size) {
  pinsight_alloc_hook hook = atomic_load_explicit(&alloc_hook, memory_order_relaxed);
  if (hook && p) hook(p, size);
}

static inline void releasing(void *p) {
  pinsight_free_hook hook = atomic_load_explicit(&free_hook, memory_order_relaxed);
  if (hook && p) hook(p);
}

EXPORT void pinsight_alloc_set_hooks(pinsight_alloc_hook on_alloc, pinsight_free_hook on_free) {
  atomic_store(&free_hook, on_free);
  atomic_store(&alloc_hook, on_alloc);
}

EXPORT void *malloc(size_t size) {
  if (!next_malloc) {
    if (resolving) return bootstrap_alloc(size);
    resolve();
  }
  void *p = next_malloc(size);
  allocated(p, size);
  return p;
}

EXPORT void *calloc(size_t count, size_t size) {
  if (!next_calloc) {
    if (resolving) {
      if (size && count > SIZE_MAX / size) return NULL;
      return bootstrap_alloc(count * size); /* static: already zero */
    }
    resolve();
  }
  void *p = next_calloc(count, size);
  allocated(p, count * size);
  return p;
}

EXPORT void free(void *p) {
  if (!p || from_bootstrap(p)) return;
  releasing(p);
  if (!next_free) resolve();
  next_free(p);
}

EXPORT void *realloc(void *p, size_t size) {
  if (from_bootstrap(p)) {
    void *moved = malloc(size);
    if (moved) {
      size_t available = (size_t)(bootstrap + sizeof bootstrap - (char *)p);
      memcpy(moved, p, size < available ? size : available);
    }
    return moved;
  }
  if (!next_realloc) resolve();
  releasing(p); /* the block may move: its address is free to reuse */
  void *q = next_realloc(p, size);
  allocated(q, size);
  return q;
}

EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  if (!next_posix_memalign) resolve();
  int status = next_posix_memalign(out, alignment, size);
  if (status == 0) allocated(*out, size);
  return status;
}

EXPORT void *aligned_alloc(size_t alignment, size_t size) {
  if (!next_aligned_alloc) resolve();
  void *p = next_aligned_alloc(alignment, size);
  allocated(p, size);
  return p;
}

EXPORT void *memalign(size_t alignment, size_t size) {
  if (!next_memalign) resolve();
  void *p = next_memalign(alignment, size);
  allocated(p, size);
  return p;
}

EXPORT void *valloc(size_t size) {
  if (!next_valloc) resolve();
  void *p = next_valloc(size);
  allocated(p, size);
  return p;
}

EXPORT void *pvalloc(size_t size) {
  if (!next_pvalloc) resolve();
  void *p = next_pvalloc(size);
  allocated(p, size);
  return p;
}
