/*
 * The probe side of the provider, built as its own shared object
 * (lttng-ust(3), "dynamic linking"). The tracepoint definitions live in the
 * extension module, which dlopen's this object at activation.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "python_pinsight_lttng_ust.h"
