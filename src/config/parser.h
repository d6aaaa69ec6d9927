// The configuration parser's internals, shared by its parts (src/config/):
// parser.cpp reads lines and builds the Config, sections.cpp parses and applies
// section headers, keys.cpp applies keys. The format's vocabulary is here too.
#pragma once

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/text.h"

namespace pinsight::config_detail {

// Domains and services of PInsight other than Python: their sections and keys
// are libpinsight.so's business and are skipped without a word.
inline constexpr std::string_view kOtherDomains[] = {"OpenMP", "MPI", "CUDA", "HIP"};
inline constexpr std::string_view kServices[] = {"Knob", "Energy", "Manifest"};

inline bool is_other_domain(std::string_view name) {
  return std::find(std::begin(kOtherDomains), std::end(kOtherDomains), name) !=
         std::end(kOtherDomains);
}

struct EventName {
  std::string_view name;
  uint32_t bits;
};
inline constexpr EventName kPysysmonEvents[] = {
    {"pysysmon_py_start", kEventPyStart}, {"pysysmon_py_return", kEventPyReturn},
    {"pysysmon_c_start", kEventCStart},   {"pysysmon_c_return", kEventCReturn},
    {"pysysmon_import", kEventImport},
};
// Names accepted by the design's `events = function, c_call`.
inline constexpr EventName kEventListNames[] = {
    {"function", kEventFunction},
    {"c_call", kEventCCall},
    {"function_begin", kEventPyStart},
    {"function_end", kEventPyReturn},
    {"c_call_begin", kEventCStart},
    {"c_call_end", kEventCReturn},
    {"import", kEventImport},
    {"alloc", kEventAlloc},
    {"gil", kEventGil},
    {"all", kEventAll | kEventImport},
    {"none", 0},
};

// "pysysmon_c_start" or "Python.pysysmon_c_start"; 0 when not an event key.
inline uint32_t pysysmon_event_bits(std::string_view key) {
  if (starts_with(key, "Python.")) key.remove_prefix(7);
  for (const EventName &event : kPysysmonEvents) {
    if (event.name == key) return event.bits;
  }
  return 0;
}

inline bool is_lexgion_key(std::string_view key) {
  return key == "trace_starts_at" || key == "max_num_traces" || key == "tracing_rate" ||
         key == "window_end_action" || key == "trace_mode_after" || key == "window_timeout" ||
         key == "window_end_trigger";
}

inline std::string lexgion_label(const NamedLexgion &named) {
  std::string label = "Lexgion(";
  if (named.python_qualified) label += "Python:";
  if (!named.file_hint.empty()) label += named.file_hint + ":";
  return label + named.qualname + ")";
}

// Every key some section accepts: what a misspelt key is compared with.
inline constexpr std::string_view kKnownKeys[] = {
    "trace_mode",         "events",
    "module_filter",      "module_exclude",
    "Python.thread",      "range",
    "trace_starts_at",    "max_num_traces",
    "tracing_rate",       "window_end_action",
    "trace_mode_after",   "window_timeout",
    "window_end_trigger", "pysysmon_py_start",
    "pysysmon_py_return", "pysysmon_c_start",
    "pysysmon_c_return",  "pysysmon_import",
};

// [Lexgion.default]'s values when the file sets none: trace everything.
const LexgionSettings &builtin_lexgion();

enum class Action { Set, Reset, Remove };

enum class SectionKind {
  None,               // before the first header
  Skipped,            // another domain's, a service's, or a header in error: keys unread
  NoBody,             // RESET / REMOVE / an invalid action: keys are ignored with a warning
  PythonDomain,       // [Python.default], [Python]
  PythonPunitThread,  // [Python.punit.thread]
  PythonThreads,      // [Python.thread(0-1)]
  LexgionGlobal,      // [Lexgion.default]
  LexgionPython,      // [Lexgion(Python).default]
  LexgionNamed,       // [Lexgion(Python:qualname), ...]
};

struct LexgionTarget {
  std::string qualname;
  std::string file_hint;
  bool python_qualified = false;
};

// What a section header says, before it is applied.
struct Header {
  Action action = Action::Set;
  std::string label;  // the text between the brackets, for messages
  SectionKind kind = SectionKind::Skipped;
  std::vector<LexgionTarget> lexgions;  // LexgionNamed
  ThreadSet threads;                    // PythonThreads
  bool wildcard = false;                // [REMOVE Python.thread(*)]
  bool inherit_python = false;          // ": Python.default"
  bool has_inheritance = false;
  bool has_constraint = false;
  ThreadSet constraint;  // Python.thread(...) in the PunitSet part
};

class Parser {
 public:
  // Each parse starts from the built-in defaults: a reload applies the whole
  // file, as docs/configuration.md says (libpinsight.so merges instead).
  Parser(std::string_view text, std::string name) : text_(text), name_(std::move(name)) {
    global_ = builtin_lexgion();
  }

  ParseResult run();

 private:
  static char *read_line(char *buffer, int size, void *self) {
    return static_cast<Parser *>(self)->next_line(buffer, size);
  }
  static int on_key(void *self, const char *section, const char *name, const char *value) {
    static_cast<Parser *>(self)->key(section, name, value);
    return 1;  // problems are reported here, never through inih
  }

  char *next_line(char *buffer, int size);
  std::string clean_line(std::string_view raw, int buffer_size);
  std::string open_section(std::string_view text);
  void key(const char *section, const char *raw_name, const char *raw_value);

  bool parse_header(std::string_view text, Header *header);
  bool parse_lexgion_header(std::string_view target, Header *header);
  bool parse_punit_sets(std::string_view text, std::string_view context, bool *has_python,
                        ThreadSet *python_threads, bool *wildcard);
  bool parse_inheritance(std::string_view text, Header *header);
  void apply_header(const Header &header);

  void python_domain_key(std::string_view key, std::string_view value);
  void thread_section_key(std::string_view key, std::string_view value);
  void lexgion_key(std::string_view key, std::string_view value);
  // False when `key` is not an event key; otherwise *valid says whether the
  // value was (an error is reported when not) and *on what it set.
  bool event_key(std::string_view key, std::string_view value, bool *valid, bool *on);
  void apply_event_key(std::string_view key, std::string_view value, uint32_t *mask);
  bool events_list(std::string_view value, uint32_t *mask);
  void module_list(std::string_view key, std::string_view value);
  bool window_end_action(std::string_view key, std::string_view value, WindowEndAction *out);
  std::vector<LexgionSettings *> current_lexgions();

  void error(std::string message) { errors_.push_back({name_, line_, std::move(message)}); }
  void warning(std::string message) { warnings_.push_back({name_, line_, std::move(message)}); }

  std::unique_ptr<Config> finish();

  std::string_view text_;
  std::string name_;
  size_t position_ = 0;
  int line_ = 0;
  std::vector<ConfigDiagnostic> errors_;
  std::vector<ConfigDiagnostic> warnings_;
  std::map<std::string, std::vector<std::string>> native_keys_;
  std::string skipped_section_;  // the section left to libpinsight.so, if the current one is
  // Keys and values too long for inih's line buffer travel as "\x01<index>".
  std::vector<std::string> long_text_;

  SectionKind kind_ = SectionKind::None;
  std::string label_;            // of the current section
  std::vector<size_t> current_;  // thread section or named lexgions the keys go to

  TraceMode mode_ = TraceMode::Tracing;
  uint32_t domain_events_ = kEventAll;
  uint64_t alloc_sample_interval_ = kDefaultAllocSampleInterval;
  Payload payload_ = Payload::Full;
  ThreadSet scope_;
  std::vector<std::string> module_filter_, module_exclude_;
  bool module_filter_seen_ = false, module_exclude_seen_ = false;
  std::vector<ThreadSection> thread_sections_;
  LexgionSettings global_;
  bool python_default_given_ = false;
  LexgionSettings python_default_;
  std::vector<NamedLexgion> named_;
  // The first `window_end_trigger = all`: warned about there when no
  // window_timeout bounds a window that may never end.
  int trigger_all_line_ = 0;
};

}  // namespace pinsight::config_detail
