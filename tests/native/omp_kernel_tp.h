/*
 * Tracepoint provider of the test kernel (omp_kernel.c): pinsight_test_omp.
 *
 * Stands in for a native library that traces itself (PInsight's OMPT events,
 * an application's own tracepoints): the tests show these events land inside
 * the c_call_begin/c_call_end of the Python call that started them.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER pinsight_test_omp

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./omp_kernel_tp.h"

#if !defined(OMP_KERNEL_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define OMP_KERNEL_TP_H

#include <lttng/tracepoint.h>

/* Every thread of the team: entering and leaving one parallel region. */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(pinsight_test_omp, region_class,
    LTTNG_UST_TP_ARGS(
        const char *, kernel,
        unsigned long, region_id,
        int, thread_num,
        int, num_threads
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(kernel, kernel)
        lttng_ust_field_integer(unsigned long, region_id, region_id)
        lttng_ust_field_integer(int, thread_num, thread_num)
        lttng_ust_field_integer(int, num_threads, num_threads)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(pinsight_test_omp, region_class, pinsight_test_omp,
    region_begin,
    LTTNG_UST_TP_ARGS(
        const char *, kernel,
        unsigned long, region_id,
        int, thread_num,
        int, num_threads
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(pinsight_test_omp, region_class, pinsight_test_omp,
    region_end,
    LTTNG_UST_TP_ARGS(
        const char *, kernel,
        unsigned long, region_id,
        int, thread_num,
        int, num_threads
    )
)

/* One chunk of the iteration space, by the thread that ran it. */
LTTNG_UST_TRACEPOINT_EVENT(pinsight_test_omp, chunk,
    LTTNG_UST_TP_ARGS(
        const char *, kernel,
        unsigned long, region_id,
        int, thread_num,
        long, lo,
        long, hi
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(kernel, kernel)
        lttng_ust_field_integer(unsigned long, region_id, region_id)
        lttng_ust_field_integer(int, thread_num, thread_num)
        lttng_ust_field_integer(long, lo, lo)
        lttng_ust_field_integer(long, hi, hi)
    )
)

#endif /* OMP_KERNEL_TP_H */

#include <lttng/tracepoint-event.h>
