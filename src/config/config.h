// The Python domain's trace configuration: PInsight's INI format, parsed with
// inih into an immutable Config. A Config is published by activation
// (config_store.h) and read lock-free by the callbacks; nothing in it changes
// after parse_config_* returns. docs/configuration.md describes the format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/settings.h"

namespace pinsight {

// TraceMode and Payload, their names: common/settings.h (Python hands them too).
const char *trace_mode_name(TraceMode mode);
// Accepts a name of kTraceModeNames (any case); false if none matches.
bool parse_trace_mode(std::string_view text, TraceMode *out);
const char *payload_name(Payload payload);
// Accepts a name of kPayloadNames (any case); false if none matches.
bool parse_payload(std::string_view text, Payload *out);

// Event selection: PInsight's pysysmon_* keys and the design's `events = ...`.
enum EventBits : uint32_t {
  kEventPyStart = 1u << 0,   // pysysmon_py_start  -> function_begin
  kEventPyReturn = 1u << 1,  // pysysmon_py_return -> function_end
  kEventCStart = 1u << 2,    // pysysmon_c_start   -> c_call_begin
  kEventCReturn = 1u << 3,   // pysysmon_c_return  -> c_call_end
  kEventImport = 1u << 4,    // pysysmon_import    -> import_begin/_end
  kEventAlloc = 1u << 5,     // alloc              -> alloc_sample/free_sample (domain-wide)
  kEventGil = 1u << 6,       // gil                -> gil_switch/gil_released (domain-wide)
  kEventFunction = kEventPyStart | kEventPyReturn,
  kEventCCall = kEventCStart | kEventCReturn,
  // The default: import, alloc and gil are asked for by name (`events = ...,
  // import`, pysysmon_import, activate(events=...)).
  kEventAll = kEventFunction | kEventCCall,
  // Events of a function's own executions (rate control applies to these).
  kEventCallStack = kEventFunction | kEventCCall,
};

// alloc_sample_interval's default: memray's and tcmalloc's order of magnitude.
inline constexpr uint64_t kDefaultAllocSampleInterval = 512 * 1024;

// A set of python_thread_id values: "(0-3)", "0-0", "(0, 2, 5-7)".
struct ThreadSet {
  bool everything = true;
  std::vector<std::pair<int, int>> ranges;  // inclusive, sorted, disjoint; used when !everything
  bool contains(int python_thread_id) const;
};

// window_end_action / trace_mode_after: what happens when a lexgion reaches
// max_num_traces.
struct WindowEndAction {
  bool has_python_mode = false;  // "MONITORING" or "Python:MONITORING"
  TraceMode python_mode = TraceMode::Tracing;
  // "INTROSPECT:pause:script[:modes]" (activation/introspection.h): python_mode is
  // then the resume mode (MONITORING when none is given).
  bool introspect = false;
  double introspect_pause_s = 0;  // > 0: that long; 0: no pause; < 0: until SIGUSR1
  std::string introspect_script;  // "" when none ("-")
};

// window_end_trigger: which caps end the TRACING window (PInsight's count policy).
enum class WindowEndTrigger : uint8_t {
  First,  // the first lexgion to reach max_num_traces, on any thread
  All,    // a thread's last lexgion with a cap to reach it, of those the thread ran
};

// Rate control of one lexgion (PInsight semantics, see lexgion.h).
struct LexgionSettings {
  int64_t trace_starts_at = 0;
  int64_t max_num_traces = -1;  // -1: unlimited
  int64_t tracing_rate = 1;
  uint32_t events = kEventAll;  // pysysmon_* keys given in the lexgion section
  // False: the section set no event (no pysysmon_* key, no ": Python.default"),
  // so `events` is unused and the thread's mask ([Python.thread(...)] section
  // or [Python.default]) applies.
  bool events_given = false;
  ThreadSet threads;  // punit constraint ": Python.thread(1-2)"
  WindowEndAction window_end;
  WindowEndTrigger window_end_trigger = WindowEndTrigger::First;
  double window_timeout_s = 0;  // 0: none (only [Lexgion.default]'s is used, see Config)

  // Filled by the parser.
  std::string section;  // "Lexgion(Python:compute)", "Lexgion.default", "default" (built-in)
  int line = 0;         // line of the section header that created it; 0 when built in
  // No execution on any thread can emit an event under the Config this came
  // from (max_num_traces = 0, or no event on any admitted thread): the code
  // object's events may be disabled until the next reload.
  bool never_traced = false;
};

// Where a code object stands under a Config; computed once per code object
// per config generation (slow path), kept in its CodeInfo.
struct CodeDecision {
  const LexgionSettings *lexgion = nullptr;  // never null after decide_code
  bool module_selected = true;               // module_filter / module_exclude
};

// [Lexgion(Python:file.py:qualname)] and its forms, after parsing.
struct NamedLexgion {
  std::string qualname;
  std::string file_hint;          // "" when none: matches a basename, stem or path suffix
  bool python_qualified = false;  // "Python:name" rather than the domain-agnostic "name"
  LexgionSettings settings;
};

// [Python.thread(0-1)] after parsing: the events of the threads it lists.
struct ThreadSection {
  ThreadSet threads;
  uint32_t events = kEventAll;
  int line = 0;
};

struct Config {
  std::string path;         // file it was read from; empty for the built-in default
  uint64_t generation = 0;  // set by the publisher (config_store.cpp)
  TraceMode mode = TraceMode::Tracing;
  Payload payload = Payload::Full;
  uint32_t events = kEventAll;  // domain default event mask
  // Mean bytes between two allocation samples (alloc_sample_interval).
  uint64_t alloc_sample_interval = kDefaultAllocSampleInterval;
  ThreadSet threads;                        // Python.thread = (...) / [Python.punit.thread] range
  std::vector<std::string> module_filter;   // empty: every module
  std::vector<std::string> module_exclude;  // names or dotted prefixes

  // Union of every mask events_for can return under this Config: an event
  // outside it is never emitted, so its sys.monitoring callback is not needed.
  uint32_t events_possible = kEventAll;
  // PInsight arms one process-wide wall-clock timer from [Lexgion.default]'s
  // window_timeout (seconds, 0: none); when it fires, this action applies.
  double window_timeout_s = 0;
  WindowEndAction window_timeout_action;

  // Named lexgion section, else [Lexgion(Python).default], else
  // [Lexgion.default], else the built-in default (trace everything).
  CodeDecision decide_code(std::string_view qualname, std::string_view filename,
                           std::string_view module) const;
  // Events to emit for a code object governed by `lexgion` on one thread:
  // domain mask, [Python.thread(...)] sections, lexgion events and punit
  // constraint combined. 0 means nothing on this thread. `lexgion` may be a
  // copy of what decide_code returned (it carries all it needs).
  uint32_t events_for(const LexgionSettings &lexgion, int python_thread_id) const;

  // The configuration as parsed, for reports and the test bindings.
  const LexgionSettings &lexgion_default() const;         // [Lexgion.default]
  const LexgionSettings &python_lexgion_default() const;  // [Lexgion(Python).default]
  const std::vector<NamedLexgion> &named_lexgions() const;
  const std::vector<ThreadSection> &thread_sections() const;

  // Implementation detail of config.cpp (sections, named lexgions, ...).
  struct Impl;
  std::shared_ptr<const Impl> impl;
};

struct ConfigDiagnostic {
  std::string file;
  int line = 0;  // 0 when the problem is not tied to a line
  std::string message;
  std::string to_string() const;  // "file:line: message"
};

struct ParseResult {
  std::unique_ptr<Config> config;  // null when errors is not empty
  std::vector<ConfigDiagnostic> errors;
  std::vector<ConfigDiagnostic> warnings;  // unknown keys, unsupported actions
  // The keys of the sections left to libpinsight.so (other domains', services'),
  // by section ("CUDA.default" -> {"device_activity"}), unjudged: what
  // `trace --domains cuda` asks of a configuration.
  std::map<std::string, std::vector<std::string>> native_keys;
};

ParseResult parse_config_file(const std::string &path);
ParseResult parse_config_string(const std::string &text, const std::string &name);
// Everything traced: used when no file is given or found.
std::unique_ptr<Config> default_config();

}  // namespace pinsight
