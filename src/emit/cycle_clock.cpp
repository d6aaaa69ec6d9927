#include "emit/cycle_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace pinsight::emitter::cycle_clock {

bool use_counter = false;
bool allowed = true;

namespace {

// Ticks per 2^20 ns (rate for thresholds).
uint64_t ticks_per_mega_ns = uint64_t{1} << 20;
// calibrate()'s first anchor: ns_at() maps from it.
Anchor origin;

// The kernel keeps the counter as its clocksource only when it found it
// constant-rate and in step across CPUs (else it switched to hpet, acpi_pm...).
bool kernel_clocksource_is(const char *wanted) {
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[64] = {};
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  size_t size = std::strlen(wanted);
  return static_cast<size_t>(n) >= size && std::strncmp(text, wanted, size) == 0 &&
         (text[size] == '\n' || text[size] == '\0');
}

bool counter_usable() {
  if (!allowed) return false;
#if defined(__x86_64__)
  // CPUID 0x80000007 EDX bit 8: invariant TSC (constant rate, runs in deep C-states).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 8))) return false;
  return kernel_clocksource_is("tsc");
#elif defined(__aarch64__)
  return kernel_clocksource_is("arch_sys_counter");
#else
  return false;
#endif
}

void calibrate_once() {
  use_counter = counter_usable();
  if (!use_counter) return;
  // 200 us: the rate is for thresholds (segment length, block age) only, and two
  // anchors within about 40 ns each make it good to 0.05% (every process that
  // traces batched pays this once).
  Anchor first = anchor();
  Anchor last = first;
  while (last.ns - first.ns < 200000) last = anchor();
  uint64_t ticks = last.ticks - first.ticks;
  uint64_t ns = last.ns - first.ns;
  if (ticks == 0) {
    use_counter = false;
    return;
  }
  origin = first;
  ticks_per_mega_ns = static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) << 20) / ns);
}

}  // namespace

Anchor anchor() {
  Anchor best;
  uint64_t best_window = UINT64_MAX;
  // Preemption or an interrupt between the reads widens the window: keep the
  // narrowest of three.
  for (int i = 0; i < 3; ++i) {
    uint64_t before = ticks();
    uint64_t ns = monotonic_ns();
    uint64_t after = ticks();
    if (!use_counter) return {ns, ns};
    if (after - before < best_window) {
      best_window = after - before;
      best = {before + (after - before) / 2, ns};
      // Narrow enough (about 100 ns at 3 GHz): no need for another try.
      if (best_window < 300) break;
    }
  }
  return best;
}

void calibrate() {
  static std::once_flag once;
  std::call_once(once, calibrate_once);
}

uint64_t ticks_for_ns(uint64_t ns) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ns) * ticks_per_mega_ns) >> 20);
}

uint64_t ns_at(uint64_t ticks, const Anchor &now) {
  if (!use_counter) return ticks;
  if (now.ticks <= origin.ticks || now.ns <= origin.ns) return now.ns;
  const uint64_t back = now.ticks > ticks ? now.ticks - ticks : 0;
  const auto ns = static_cast<uint64_t>(static_cast<unsigned __int128>(back) *
                                        (now.ns - origin.ns) / (now.ticks - origin.ticks));
  return ns < now.ns ? now.ns - ns : 0;
}

}  // namespace pinsight::emitter::cycle_clock
