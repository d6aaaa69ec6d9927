/*
 * The contract between the preload library (libpinsight_alloc_preload.so,
 * LD_PRELOAD'ed by `pinsight-python trace --alloc`) and the extension: the
 * library interposes malloc and friends, and calls the hooks the extension
 * registers. alloc_hook runs after a block is allocated, free_hook before a
 * block is released (its address cannot have been reused yet).
 */
#ifndef PINSIGHT_ALLOC_PRELOAD_API_H
#define PINSIGHT_ALLOC_PRELOAD_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*pinsight_alloc_hook)(void *address, size_t size);
typedef void (*pinsight_free_hook)(void *address);

/* Exported by the preload library; looked up with dlsym(RTLD_DEFAULT). */
void pinsight_alloc_set_hooks(pinsight_alloc_hook alloc_hook, pinsight_free_hook free_hook);
#define PINSIGHT_ALLOC_SET_HOOKS_SYMBOL "pinsight_alloc_set_hooks"

#ifdef __cplusplus
}
#endif

#endif /* PINSIGHT_ALLOC_PRELOAD_API_H */
