// The batched payload's per-record clock: the CPU's cycle counter (x86-64's
// TSC, AArch64's virtual counter) read per record, mapped to LTTng-UST's clock
// (CLOCK_MONOTONIC) per segment of records by interpolating between two
// anchors, each a real clock_gettime read paired with the counter (block_buffer.cpp).
// A counter read costs a few ns where clock_gettime costs about 20.
//
// Only where the counter runs at a constant rate, through sleep states, and in
// step on every CPU, as the kernel's own clocksource then is (tsc,
// arch_sys_counter): elsewhere, or not `allowed` (PINSIGHT_PYTHON_CYCLE_CLOCK=0), ticks()
// is clock_gettime itself and every anchor maps it as is.
#pragma once

#include <time.h>

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace pinsight::emitter::cycle_clock {

// LTTng-UST's clock (no clock plugin: activation refuses batched under one).
inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Set once by calibrate(), before any record.
extern bool use_counter;
// activate()'s choice (PINSIGHT_PYTHON_CYCLE_CLOCK), read by calibrate().
extern bool allowed;

// The counter itself, where use_counter said it can be used.
inline uint64_t counter() {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t value;
  asm volatile("mrs %0, cntvct_el0" : "=r"(value));
  return value;
#else
  return monotonic_ns();
#endif
}

inline uint64_t ticks() { return __builtin_expect(use_counter, 1) ? counter() : monotonic_ns(); }

// A counter value and the clock's at the same instant, within half of
// `window` ticks (the two counter reads around clock_gettime; the narrowest of
// a few tries). Async-signal-safe.
struct Anchor {
  uint64_t ticks = 0;
  uint64_t ns = 0;
};
Anchor anchor();

// Once, before the first record (blocks::enable): whether the counter can be
// used, and its rate. Idempotent.
void calibrate();
// Counter ticks in `ns` nanoseconds (a rate measured at calibrate(), good to
// about 1%: for thresholds only, never for timestamps).
uint64_t ticks_for_ns(uint64_t ns);
// The clock's time at an earlier counter value `ticks`, mapped between the
// anchor calibrate() took and `now` (their rate, over the process's life so
// far: good to the clock's drift against the counter since then, where
// ticks_for_ns's 200 us rate would be off by seconds over hours). Without the
// counter, ticks are the clock's own. Async-signal-safe.
uint64_t ns_at(uint64_t ticks, const Anchor &now);

}  // namespace pinsight::emitter::cycle_clock
