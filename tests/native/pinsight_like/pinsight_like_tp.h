/*
 * Tracepoint provider of the PInsight stand-in (pinsight_like.c):
 * pinsight_like_lttng_ust. Its own provider, as PInsight's ompt_pinsight_lttng_ust
 * is: the tests check that pinsight-python leaves these events alone.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER pinsight_like_lttng_ust

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./pinsight_like_tp.h"

#if !defined(PINSIGHT_LIKE_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define PINSIGHT_LIKE_TP_H

#include <lttng/tracepoint.h>

/* The encountering thread, around the parallel region (OMPT parallel_begin/_end). */
LTTNG_UST_TRACEPOINT_EVENT(pinsight_like_lttng_ust, region_begin,
    LTTNG_UST_TP_ARGS(unsigned long, region_id, int, requested_team_size),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(unsigned long, region_id, region_id)
        lttng_ust_field_integer(int, requested_team_size, requested_team_size)
    )
)

LTTNG_UST_TRACEPOINT_EVENT(pinsight_like_lttng_ust, region_end,
    LTTNG_UST_TP_ARGS(unsigned long, region_id),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(unsigned long, region_id, region_id)
    )
)

/* Every thread of the team, inside the region, before its closing barrier
 * (OMPT implicit_task_begin). */
LTTNG_UST_TRACEPOINT_EVENT(pinsight_like_lttng_ust, implicit_task,
    LTTNG_UST_TP_ARGS(unsigned long, region_id, int, thread_num, int, num_threads),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(unsigned long, region_id, region_id)
        lttng_ust_field_integer(int, thread_num, thread_num)
        lttng_ust_field_integer(int, num_threads, num_threads)
    )
)

/* Its control thread, after re-reading the configuration on SIGUSR1. */
LTTNG_UST_TRACEPOINT_EVENT(pinsight_like_lttng_ust, reload,
    LTTNG_UST_TP_ARGS(int, reloads, int, tracing),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, reloads, reloads)
        lttng_ust_field_integer(int, tracing, tracing)
    )
)

#endif /* PINSIGHT_LIKE_TP_H */

#include <lttng/tracepoint-event.h>
