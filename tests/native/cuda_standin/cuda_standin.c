/*
 * PInsight's real CUDA provider (cupti_pinsight_lttng_ust, its header
 * ../shared/pinsight/src/cupti_lttng_ust_tracepoint.h, unchanged), fired the
 * way libpinsight's CUPTI callbacks fire it, for machines without a GPU: a
 * kernel launch (cudaKernelLaunch_begin/_end with its correlationId), then,
 * later and from another thread, the kernel's device activity
 * (cudaKernelActivity: start_gpu/end_gpu in CUPTI's clock) and, once, the
 * CUPTI clock's calibration against CLOCK_MONOTONIC. Only the device is
 * missing: the provider, its events and fields are PInsight's.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "cupti_lttng_ust_tracepoint.h"

#include <pthread.h>
#include <stdint.h>

void standin_calibrate(uint64_t clock_monotonic_ns, uint64_t cupti_timestamp_ns) {
  lttng_ust_tracepoint(cupti_pinsight_lttng_ust, cuda_clock_calibration, clock_monotonic_ns,
                       cupti_timestamp_ns);
}

void standin_launch(unsigned int correlation_id, const char *kernel) {
  struct contextStreamId_t stream = {1, 7};
  struct dimension_t dims = {64, 1, 1, 256, 1, 1};
  lttng_ust_tracepoint(cupti_pinsight_lttng_ust, cudaKernelLaunch_begin, 0, correlation_id, 0,
                       (const void *)0, kernel, &stream, &dims);
  lttng_ust_tracepoint(cupti_pinsight_lttng_ust, cudaKernelLaunch_end, 0, correlation_id, 0,
                       (const void *)0, kernel);
}

void standin_kernel_activity(unsigned int correlation_id, uint64_t start_gpu, uint64_t end_gpu,
                             const char *kernel) {
  lttng_ust_tracepoint(cupti_pinsight_lttng_ust, cudaKernelActivity, 0, correlation_id, start_gpu,
                       end_gpu, 1, 7, kernel);
}

/* CUPTI's buffering, for the flush at exit: activities queued here reach the
 * trace only when cuptiActivityFlushAll (CUPTI's own name and signature) is
 * called, as libcupti hands over an incomplete buffer only when flushed. */
struct pending_activity {
  unsigned int correlation_id;
  uint64_t start_gpu, end_gpu;
  const char *kernel; /* a literal of the caller's, kept alive by it */
};
static struct pending_activity pending[4096];
static unsigned int pending_count;

void standin_kernel_activity_buffered(unsigned int correlation_id, uint64_t start_gpu,
                                      uint64_t end_gpu, const char *kernel) {
  if (pending_count < sizeof pending / sizeof pending[0]) {
    pending[pending_count++] =
        (struct pending_activity){correlation_id, start_gpu, end_gpu, kernel};
  }
}

int cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  for (unsigned int i = 0; i < pending_count; ++i) {
    standin_kernel_activity(pending[i].correlation_id, pending[i].start_gpu, pending[i].end_gpu,
                            pending[i].kernel);
  }
  pending_count = 0;
  return 0; /* CUPTI_SUCCESS */
}

/* A launch from a thread that runs no Python (PyTorch's autograd engine threads),
 * made while the calling Python thread waits in this function for it to finish. */
struct worker_launch {
  unsigned int correlation_id;
  const char *kernel;
};

static void *launch_on_worker(void *arg) {
  const struct worker_launch *launch = arg;
  standin_launch(launch->correlation_id, launch->kernel);
  return 0;
}

int standin_launch_from_worker(unsigned int correlation_id, const char *kernel) {
  struct worker_launch launch = {correlation_id, kernel};
  pthread_t worker;
  if (pthread_create(&worker, 0, launch_on_worker, &launch) != 0) return -1;
  return pthread_join(worker, 0);
}
