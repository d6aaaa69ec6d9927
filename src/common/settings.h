// The settings whose values have names: one enum each, with its names, the
// core's half of the one table of settings (python/pinsight_python/activation/
// settings.py, SETTINGS). Python hands a mode or payload as its place in these
// lists; the configuration file's parser reads the names, the backends' factory
// and status() write them; the core exports them (_pinsight_python.MODES,
// PAYLOADS, EVENTS, BACKENDS) and tests/unit/test_settings.py holds Python's
// enums equal to them. Header-only; includes nothing of ours.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace pinsight {

enum class TraceMode : uint8_t { Off, Standby, Monitoring, Tracing };
inline constexpr std::string_view kTraceModeNames[] = {"OFF", "STANDBY", "MONITORING", "TRACING"};

// What a frame or native-call event carries: `full` (the design's payload,
// names on every event) or `compact` (integers; names in code_info /
// callable_info events) or `batched` (compact's records packed per thread
// into event_block events). [Python] payload = full | compact | batched.
enum class Payload : uint8_t { Full, Compact, Batched };
inline constexpr std::string_view kPayloadNames[] = {"full", "compact", "batched"};

// What activate(events=...) asks for (the configuration may add import, alloc
// and gil); the core takes one flag per event, `<name>_events`.
enum class ActivationEvent : uint8_t { Function, CCall, Import, Alloc, Gil };
inline constexpr std::string_view kActivationEventNames[] = {"function", "c_call", "import",
                                                             "alloc", "gil"};

// The event source (the tracer's Backend interface is another thing: this
// chooses one). Crosses from Python by name.
enum class BackendChoice : uint8_t { Auto, SysMonitoring, Setprofile };
inline constexpr std::string_view kBackendNames[] = {"auto", "sys.monitoring", "setprofile"};

// A value's name in its list.
template <typename Enum, size_t N>
constexpr std::string_view name_of(Enum value, const std::string_view (&names)[N]) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : std::string_view();
}

// The value `text` names exactly; false if none does.
template <typename Enum, size_t N>
bool named(std::string_view text, const std::string_view (&names)[N], Enum *out) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == text) {
      *out = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

// "A, B or C": the names an error message expects.
template <typename Names>
std::string expected_names(const Names &names) {
  std::string text;
  const size_t count = std::size(names);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) text += i + 1 == count ? " or " : ", ";
    text += names[i];
  }
  return text;
}

}  // namespace pinsight
