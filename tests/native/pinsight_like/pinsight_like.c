/*
 * A stand-in for PInsight's libpinsight.so, for tests/integration/test_coexistence.py.
 *
 * It does to a process what libpinsight.so does that matters to pinsight-python
 * (checked against PInsight's enter_exit.c and pinsight_control_thread.c), and
 * nothing else:
 *
 * - at load (a constructor: LD_PRELOAD, or dlopen/ctypes later), it reads the
 *   trace configuration named by PINSIGHT_TRACE_CONFIG_FILE, starts a control
 *   thread that blocks SIGUSR1 and sleeps on a semaphore, then installs a
 *   SIGUSR1 handler with sigaction() that only posts the semaphore;
 * - like PInsight, it does NOT chain to the handler it replaces (sigaction's
 *   old action is not kept), unless built with -DPINSIGHT_LIKE_CHAIN=1;
 * - on each wake-up the control thread re-reads the configuration (the
 *   `trace_mode` of its `[OpenMP...]` section) and emits a `reload` event;
 * - pinsight_like_kernel() runs an OpenMP parallel region (gcc -fopenmp) and,
 *   while the domain is TRACING, emits its own LTTng-UST events around it and
 *   from every thread inside it.
 *
 * Built by the tests with gcc at test time; not part of the package.
 */
#define _GNU_SOURCE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "pinsight_like_tp.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PINSIGHT_LIKE_CHAIN
#define PINSIGHT_LIKE_CHAIN 0
#endif

static sem_t wakeup;
static pthread_t control;
static int control_started;
static volatile int stopping;
static int signals_seen; /* handler invocations (atomics) */
static int reloads_done; /* configurations re-read by the control thread */
static volatile int tracing = 1;
static unsigned long next_region;
#if PINSIGHT_LIKE_CHAIN
static struct sigaction previous;
#endif

/* The trace_mode of the [OpenMP...] sections; TRACING without a file. */
static int read_config(void) {
  const char *path = getenv("PINSIGHT_TRACE_CONFIG_FILE");
  if (!path) return 1;
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  char line[512];
  int in_openmp = 0, result = 1;
  while (fgets(line, sizeof line, f)) {
    char *s = line + strspn(line, " \t");
    if (*s == '[') {
      in_openmp = strncmp(s, "[OpenMP", 7) == 0;
    } else if (in_openmp && strncmp(s, "trace_mode", 10) == 0) {
      char *v = strpbrk(s, "=:");
      if (v) {
        v += 1 + strspn(v + 1, " \t");
        result = strncmp(v, "TRACING", 7) == 0;
      }
    }
  }
  fclose(f);
  return result;
}

static void *control_loop(void *arg) {
  (void)arg;
  sigset_t mask; /* as PInsight's control thread: the signal goes elsewhere */
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &mask, NULL);
  pthread_setname_np(pthread_self(), "pinsight-like");
  for (;;) {
    if (sem_wait(&wakeup) != 0) continue;
    if (stopping) break;
    tracing = read_config();
    int n = __atomic_add_fetch(&reloads_done, 1, __ATOMIC_SEQ_CST);
    lttng_ust_tracepoint(pinsight_like_lttng_ust, reload, n, tracing);
  }
  return NULL;
}

#if PINSIGHT_LIKE_CHAIN
static void on_sigusr1(int signo, siginfo_t *info, void *context) {
  int saved = errno;
  __atomic_add_fetch(&signals_seen, 1, __ATOMIC_SEQ_CST);
  sem_post(&wakeup);
  errno = saved;
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(signo, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signo);
  }
}
#else
static void on_sigusr1(int signo) {
  (void)signo;
  __atomic_add_fetch(&signals_seen, 1, __ATOMIC_SEQ_CST);
  sem_post(&wakeup);
}
#endif

__attribute__((constructor(200))) static void pinsight_like_init(void) {
  tracing = read_config();
  sem_init(&wakeup, 0, 0);
  control_started = pthread_create(&control, NULL, control_loop, NULL) == 0;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  sigemptyset(&action.sa_mask);
#if PINSIGHT_LIKE_CHAIN
  action.sa_sigaction = on_sigusr1;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR1, &action, &previous);
#else
  action.sa_handler = on_sigusr1;
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, NULL); /* what PInsight does: the old handler is lost */
#endif
}

__attribute__((destructor(200))) static void pinsight_like_fini(void) {
  if (!control_started) return;
  stopping = 1;
  sem_post(&wakeup);
  pthread_join(control, NULL);
}

double pinsight_like_kernel(int n) {
  unsigned long region = __atomic_add_fetch(&next_region, 1, __ATOMIC_SEQ_CST);
  int traced = tracing;
  double sum = 0.0;
  if (traced) lttng_ust_tracepoint(pinsight_like_lttng_ust, region_begin, region, omp_get_max_threads());
#pragma omp parallel reduction(+ : sum)
  {
    if (traced)
      lttng_ust_tracepoint(pinsight_like_lttng_ust, implicit_task, region, omp_get_thread_num(),
                           omp_get_num_threads());
#pragma omp for
    for (int i = 0; i < n; i++) sum += (double)i * 0.5;
  }
  if (traced) lttng_ust_tracepoint(pinsight_like_lttng_ust, region_end, region);
  return sum;
}

int pinsight_like_signals(void) { return __atomic_load_n(&signals_seen, __ATOMIC_SEQ_CST); }
int pinsight_like_reloads(void) { return __atomic_load_n(&reloads_done, __ATOMIC_SEQ_CST); }
int pinsight_like_tracing(void) { return tracing; }
