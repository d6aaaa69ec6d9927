// Parser of PInsight's trace configuration format for the Python domain.
//
// inih does the INI work (sections, key = value, comments); lines are cleaned
// before inih sees them because PInsight's format goes beyond what inih
// accepts: section headers carry ": Inheritance : PunitSet" after the ']' and
// can be longer than inih's section-name buffer, keys are indented (inih would
// take them for continuation lines), and inline comments start with '#'. The
// reader hands inih one cleaned line per physical line, so the line count of
// the reader is the line number of whatever inih reports, and applies each
// section header when inih reaches it, so that PInsight's snapshot
// inheritance ("a section sees what the lines above it set") holds.
#include "config.h"

#include <fcntl.h>
#include <ini.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "module_names.h"

namespace pinsight {

// ---------------------------------------------------------------------------
// Small public pieces

const char *trace_mode_name(TraceMode mode) {
  switch (mode) {
    case TraceMode::Off:
      return "OFF";
    case TraceMode::Standby:
      return "STANDBY";
    case TraceMode::Monitoring:
      return "MONITORING";
    case TraceMode::Tracing:
      return "TRACING";
  }
  return "TRACING";
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

// Splits on every `sep`; items are trimmed, empty ones kept.
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    items.push_back(trim(text.substr(start, at == std::string_view::npos ? at : at - start)));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return items;
}

// At most `limit` bytes of `text`, cut between UTF-8 characters, "..." when cut.
std::string shorten(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

// For messages: quoted, control bytes escaped, long text shortened.
std::string quote(std::string_view text) {
  std::string out = "'";
  for (char c : shorten(text, 60)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "'";
}

bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t code;
    if ((byte & 0xe0) == 0xc0) {
      extra = 1, code = byte & 0x1f;
    } else if ((byte & 0xf0) == 0xe0) {
      extra = 2, code = byte & 0x0f;
    } else if ((byte & 0xf8) == 0xf0) {
      extra = 3, code = byte & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Strict decimal integer: optional sign, digits, nothing else.
bool parse_int64(std::string_view text, int64_t *out) {
  text = trim(text);
  if (text.empty() || text.size() > 30) return false;
  const std::string buffer(text);
  const char *digits = buffer.c_str();
  if (*digits == '+' || *digits == '-') ++digits;
  if (!(*digits >= '0' && *digits <= '9')) return false;
  errno = 0;
  char *end = nullptr;
  const long long value = std::strtoll(buffer.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = value;
  return true;
}

// A size in bytes > 0: "524288", "64KiB", "64 KB", "1M" (K, M, G are powers of 1024).
bool parse_byte_size(std::string_view text, uint64_t *out) {
  text = trim(text);
  size_t digits = 0;
  while (digits < text.size() && digits < 16 && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0 || (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')) {
    return false;
  }
  uint64_t value = std::strtoull(std::string(text.substr(0, digits)).c_str(), nullptr, 10);
  std::string unit(trim(text.substr(digits)));
  for (char &c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb" || unit == "kib") scale = uint64_t{1} << 10;
  if (unit == "m" || unit == "mb" || unit == "mib") scale = uint64_t{1} << 20;
  if (unit == "g" || unit == "gb" || unit == "gib") scale = uint64_t{1} << 30;
  if (scale == 0 || value == 0 || value > (uint64_t{1} << 40) / scale) return false;
  *out = value * scale;
  return true;
}

bool parse_seconds(std::string_view text, double *out) {
  text = trim(text);
  if (text.empty() || text.size() > 40) return false;
  const std::string buffer(text);
  const char first = buffer[0];
  if (!((first >= '0' && first <= '9') || first == '-' || first == '+' || first == '.')) {
    return false;  // no "inf", "nan", hex floats
  }
  errno = 0;
  char *end = nullptr;
  const double value = std::strtod(buffer.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

// on/off/true/false/1/0, any case.
bool parse_switch(std::string_view text, bool *out) {
  text = trim(text);
  if (iequals(text, "on") || iequals(text, "true") || text == "1") {
    *out = true;
    return true;
  }
  if (iequals(text, "off") || iequals(text, "false") || text == "0") {
    *out = false;
    return true;
  }
  return false;
}

// Domains and services of PInsight other than Python: their sections and keys
// are libpinsight.so's business and are skipped without a word.
constexpr std::string_view kOtherDomains[] = {"OpenMP", "MPI", "CUDA", "HIP"};
constexpr std::string_view kServices[] = {"Knob", "Energy", "Manifest"};

bool is_other_domain(std::string_view name) {
  return std::find(std::begin(kOtherDomains), std::end(kOtherDomains), name) !=
         std::end(kOtherDomains);
}

struct EventName {
  std::string_view name;
  uint32_t bits;
};
constexpr EventName kPysysmonEvents[] = {
    {"pysysmon_py_start", kEventPyStart}, {"pysysmon_py_return", kEventPyReturn},
    {"pysysmon_c_start", kEventCStart},   {"pysysmon_c_return", kEventCReturn},
    {"pysysmon_import", kEventImport},
};
// Names accepted by the design's `events = function, c_call`.
constexpr EventName kEventListNames[] = {
    {"function", kEventFunction},      {"c_call", kEventCCall},
    {"function_begin", kEventPyStart}, {"function_end", kEventPyReturn},
    {"c_call_begin", kEventCStart},    {"c_call_end", kEventCReturn},
    {"import", kEventImport},          {"alloc", kEventAlloc},
    {"all", kEventAll | kEventImport}, {"none", 0},
};

// "pysysmon_c_start" or "Python.pysysmon_c_start"; 0 when not an event key.
uint32_t pysysmon_event_bits(std::string_view key) {
  if (starts_with(key, "Python.")) key.remove_prefix(7);
  for (const EventName &event : kPysysmonEvents) {
    if (event.name == key) return event.bits;
  }
  return 0;
}

bool is_lexgion_key(std::string_view key) {
  return key == "trace_starts_at" || key == "max_num_traces" || key == "tracing_rate" ||
         key == "window_end_action" || key == "trace_mode_after" || key == "window_timeout" ||
         key == "window_end_trigger";
}

// Every key some section accepts: what a misspelt key is compared with.
constexpr std::string_view kKnownKeys[] = {
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

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = diagonal + (std::tolower(static_cast<unsigned char>(a[i - 1])) !=
                                              std::tolower(static_cast<unsigned char>(b[j - 1])));
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

// "; did you mean 'x'?" for the closest of `known` (within a third of the word's
// length in edits), or nothing.
template <typename Names>
std::string did_you_mean(std::string_view word, const Names &known) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (std::string_view name : known) {
    const size_t distance = edit_distance(word, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best.empty() ? std::string() : "; did you mean '" + std::string(best) + "'?";
}

std::string lexgion_label(const NamedLexgion &named) {
  std::string label = "Lexgion(";
  if (named.python_qualified) label += "Python:";
  if (!named.file_hint.empty()) label += named.file_hint + ":";
  return label + named.qualname + ")";
}

void normalize(ThreadSet *set) {
  if (set->everything) {
    set->ranges.clear();
    return;
  }
  auto &ranges = set->ranges;
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int, int>> merged;
  for (const auto &range : ranges) {
    if (!merged.empty() && static_cast<int64_t>(range.first) <= int64_t{merged.back().second} + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  ranges = std::move(merged);
}

ThreadSet intersect(const ThreadSet &a, const ThreadSet &b) {
  if (a.everything) return b;
  if (b.everything) return a;
  ThreadSet out;
  out.everything = false;
  for (const auto &x : a.ranges) {
    for (const auto &y : b.ranges) {
      const int low = std::max(x.first, y.first), high = std::min(x.second, y.second);
      if (low <= high) out.ranges.emplace_back(low, high);
    }
  }
  normalize(&out);
  return out;
}

bool same_set(const ThreadSet &a, const ThreadSet &b) {
  return a.everything == b.everything && (a.everything || a.ranges == b.ranges);
}

// "0-3", "0, 2, 5-7", "*" (with or without the parentheses of a key value).
bool parse_thread_ids(std::string_view text, ThreadSet *out, bool *wildcard) {
  text = trim(text);
  if (text.size() >= 2 && text.front() == '(' && text.back() == ')') {
    text = trim(text.substr(1, text.size() - 2));
  }
  *wildcard = false;
  ThreadSet set;
  if (text == "*") {
    *wildcard = true;
    *out = set;
    return true;
  }
  set.everything = false;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) return false;
    const size_t dash = item.find('-');
    int64_t low, high;
    if (dash == std::string_view::npos) {
      if (!parse_int64(item, &low)) return false;
      high = low;
    } else if (!parse_int64(item.substr(0, dash), &low) ||
               !parse_int64(item.substr(dash + 1), &high)) {
      return false;
    }
    if (trim(item)[0] == '+' || low < 0 || high < low || high > INT_MAX) return false;
    set.ranges.emplace_back(static_cast<int>(low), static_cast<int>(high));
  }
  normalize(&set);
  *out = set;
  return true;
}

// Bit set on a per-thread mask when the thread is traced at all.
constexpr uint32_t kAdmitted = 1u << 31;
// Threads beyond this get their mask computed on each call rather than looked up.
constexpr int kThreadTableLimit = 1024;

const LexgionSettings &builtin_lexgion() {
  static const LexgionSettings settings = [] {
    LexgionSettings s;
    s.section = "default";
    return s;
  }();
  return settings;
}

}  // namespace

bool parse_trace_mode(std::string_view text, TraceMode *out) {
  text = trim(text);
  static constexpr TraceMode kModes[] = {TraceMode::Off, TraceMode::Standby, TraceMode::Monitoring,
                                         TraceMode::Tracing};
  for (TraceMode mode : kModes) {
    if (iequals(text, trace_mode_name(mode))) {
      *out = mode;
      return true;
    }
  }
  return false;
}

bool ThreadSet::contains(int python_thread_id) const {
  if (everything) return true;
  for (const auto &range : ranges) {
    if (python_thread_id < range.first) return false;  // sorted
    if (python_thread_id <= range.second) return true;
  }
  return false;
}

std::string ConfigDiagnostic::to_string() const {
  std::string text = file;
  if (line > 0) text += ":" + std::to_string(line);
  return text + ": " + message;
}

// ---------------------------------------------------------------------------
// The parsed configuration

struct Config::Impl {
  LexgionSettings global_default;  // [Lexgion.default]
  LexgionSettings python_default;  // [Lexgion(Python).default], else a copy of the above
  std::vector<NamedLexgion> named;
  std::unordered_map<std::string, std::vector<size_t>> named_by_qualname;
  std::vector<ThreadSection> thread_sections;

  // The per-thread part of events_for: kAdmitted | mask, by python_thread_id.
  ThreadSet scope;
  uint32_t domain_events = kEventAll;
  std::vector<uint32_t> thread_table;
  bool beyond_table_constant = true;
  uint32_t beyond_table = 0;

  uint32_t compute_thread_slot(int python_thread_id) const {
    if (!scope.contains(python_thread_id)) return 0;
    if (thread_sections.empty()) return kAdmitted | domain_events;
    // The last section listing the thread decides, as later lines override.
    for (auto it = thread_sections.rbegin(); it != thread_sections.rend(); ++it) {
      if (it->threads.contains(python_thread_id)) return kAdmitted | it->events;
    }
    return 0;  // [Python.thread(...)] sections list the threads that are traced
  }

  uint32_t thread_slot(int python_thread_id) const {
    if (python_thread_id >= 0 && static_cast<size_t>(python_thread_id) < thread_table.size()) {
      return thread_table[python_thread_id];
    }
    if (python_thread_id >= 0 && beyond_table_constant) return beyond_table;
    return compute_thread_slot(python_thread_id);
  }

  void build_thread_table() {
    int64_t bound = 0;  // one past the largest finite thread id mentioned
    const auto note = [&bound](const ThreadSet &set) {
      if (!set.everything && !set.ranges.empty()) {
        bound = std::max<int64_t>(bound, int64_t{set.ranges.back().second} + 1);
      }
    };
    note(scope);
    for (const ThreadSection &section : thread_sections) note(section.threads);
    const int64_t size = std::min<int64_t>(std::max<int64_t>(bound, 1), kThreadTableLimit);
    thread_table.resize(size);
    for (int id = 0; id < size; ++id) thread_table[id] = compute_thread_slot(id);
    beyond_table_constant = bound <= size;
    beyond_table = beyond_table_constant ? compute_thread_slot(static_cast<int>(size)) : 0;
  }
};

namespace {

const std::vector<NamedLexgion> kNoNamed;
const std::vector<ThreadSection> kNoThreadSections;

// Thread ids where events_for can change value for `lexgion`: a value from
// every stretch of ids the thread sets cut the id space into.
std::vector<int> representative_threads(const Config &config, const LexgionSettings &lexgion) {
  std::vector<int> ids = {0};
  const auto add = [&ids](const ThreadSet &set) {
    if (set.everything) return;
    for (const auto &range : set.ranges) {
      ids.push_back(range.first);
      if (range.second < INT_MAX) ids.push_back(range.second + 1);
    }
  };
  add(config.threads);
  add(lexgion.threads);
  for (const ThreadSection &section : config.thread_sections()) add(section.threads);
  return ids;
}

// ---------------------------------------------------------------------------
// The parser

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
  Parser(std::string_view text, std::string name, const Config *previous)
      : text_(text), name_(std::move(name)) {
    if (previous != nullptr) {
      mode_ = previous->mode;
      domain_events_ = previous->events;
      alloc_sample_interval_ = previous->alloc_sample_interval;
      scope_ = previous->threads;
      module_filter_ = previous->module_filter;
      module_exclude_ = previous->module_exclude;
      thread_sections_ = previous->thread_sections();
      global_ = previous->lexgion_default();
    } else {
      global_ = builtin_lexgion();
    }
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
  // Keys and values too long for inih's line buffer travel as "\x01<index>".
  std::vector<std::string> long_text_;

  SectionKind kind_ = SectionKind::None;
  std::string label_;            // of the current section
  std::vector<size_t> current_;  // thread section or named lexgions the keys go to

  TraceMode mode_ = TraceMode::Tracing;
  uint32_t domain_events_ = kEventAll;
  uint64_t alloc_sample_interval_ = kDefaultAllocSampleInterval;
  ThreadSet scope_;
  std::vector<std::string> module_filter_, module_exclude_;
  bool module_filter_seen_ = false, module_exclude_seen_ = false;
  std::vector<ThreadSection> thread_sections_;
  LexgionSettings global_;
  bool python_default_given_ = false;
  LexgionSettings python_default_;
  std::vector<NamedLexgion> named_;
};

ParseResult Parser::run() {
  const int status = ini_parse_stream(&Parser::read_line, this, &Parser::on_key, this);
  if (status != 0) {
    // Every line inih sees was checked above it; this is a bug, not the file's.
    line_ = status > 0 ? status : 0;
    error(status == -2 ? "out of memory" : "inih rejected this line (internal error)");
  }
  line_ = 0;
  ParseResult result;
  std::unique_ptr<Config> config = finish();
  result.errors = std::move(errors_);
  result.warnings = std::move(warnings_);
  if (result.errors.empty()) result.config = std::move(config);
  return result;
}

char *Parser::next_line(char *buffer, int size) {
  if (position_ >= text_.size()) return nullptr;
  if (size < 64) {  // inih built with a tiny INI_MAX_LINE: tokens would not fit
    error("inih's line buffer is too small (" + std::to_string(size) + " bytes)");
    return nullptr;
  }
  size_t end = text_.find('\n', position_);
  if (end == std::string_view::npos) end = text_.size();
  std::string_view raw = text_.substr(position_, end - position_);
  position_ = end + 1;
  ++line_;
  const std::string cleaned = clean_line(raw, size);
  // clean_line keeps every line within inih's buffer.
  std::memcpy(buffer, cleaned.data(), cleaned.size());
  buffer[cleaned.size()] = '\n';
  buffer[cleaned.size() + 1] = '\0';
  return buffer;
}

std::string Parser::clean_line(std::string_view raw, int buffer_size) {
  if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
  if (line_ == 1 && starts_with(raw, "\xEF\xBB\xBF")) raw.remove_prefix(3);
  // Comments: '#' or ';' at the start of the line or after a blank. Bytes are
  // enough to find them; what they contain is nobody's business.
  for (size_t i = 0; i < raw.size(); ++i) {
    if ((raw[i] == '#' || raw[i] == ';') && (i == 0 || is_blank(raw[i - 1]))) {
      raw = raw.substr(0, i);
      break;
    }
  }
  const std::string_view line = trim(raw);
  if (line.empty()) return "";
  // Another domain's keys are libpinsight.so's to judge.
  if (line.front() != '[' && kind_ == SectionKind::Skipped) return "";
  if (line.find('\0') != std::string_view::npos) {
    error("unexpected NUL byte: the file is not text");
    return "";
  }
  if (!valid_utf8(line)) {
    error("the line is not valid UTF-8 text");
    return "";
  }
  for (char c : line) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t' && c != '\f' && c != '\v') || byte == 0x7f) {
      error("unexpected control character " + quote(std::string_view(&c, 1)));
      return "";
    }
  }
  if (line.front() == '[') return open_section(line);

  const size_t separator = line.find_first_of("=:");
  if (separator == std::string_view::npos) {
    error("expected 'key = value' or a [section] header, got " + quote(line));
    return "";
  }
  std::string key(trim(line.substr(0, separator)));
  std::string value(trim(line.substr(separator + 1)));
  if (key.empty()) {
    error("missing key before '" + std::string(1, line[separator]) + "'");
    return "";
  }
  // inih keeps keys to 49 bytes and lines to its buffer; longer ones go by index.
  const auto by_index = [this](std::string text) {
    long_text_.push_back(std::move(text));
    return "\x01" + std::to_string(long_text_.size() - 1);
  };
  if (key.size() > 40) key = by_index(std::move(key));
  if (key.size() + value.size() + 3 > static_cast<size_t>(buffer_size)) {
    value = by_index(std::move(value));
  }
  return key + "=" + value;
}

std::string Parser::open_section(std::string_view text) {
  Header header;
  if (parse_header(text, &header)) {
    apply_header(header);
  } else {
    kind_ = SectionKind::Skipped;
  }
  // The section name inih passes back is not used: the current section is
  // known here, and a name could be too long for inih.
  return "[s]";
}

bool Parser::parse_header(std::string_view text, Header *header) {
  const size_t close = text.find(']');
  if (close == std::string_view::npos) {
    error("unterminated section header: expected ']' in " + quote(text));
    return false;
  }
  std::string_view inside = trim(text.substr(1, close - 1));
  const std::string_view suffix = trim(text.substr(close + 1));
  header->label = std::string(inside);

  const size_t blank = inside.find_first_of(" \t");
  if (blank != std::string_view::npos) {
    const std::string_view word = inside.substr(0, blank);
    if (iequals(word, "SET") || iequals(word, "RESET") || iequals(word, "REMOVE")) {
      header->action = iequals(word, "SET")     ? Action::Set
                       : iequals(word, "RESET") ? Action::Reset
                                                : Action::Remove;
      inside = trim(inside.substr(blank));
    }
  }
  const std::string_view target = inside;
  if (target.empty()) {
    error("empty section header " + quote(text.substr(0, close + 1)));
    return false;
  }

  // Classify the target.
  if (target == "Lexgion.default") {
    header->kind = SectionKind::LexgionGlobal;
  } else if (starts_with(target, "Lexgion(")) {
    if (!parse_lexgion_header(target, header)) return false;
  } else if (starts_with(target, "Lexgion")) {
    error("unknown Lexgion section [" + std::string(target) +
          "] (expected Lexgion.default, Lexgion(Python).default or Lexgion(Python:name, ...))");
    return false;
  } else if (target == "Python" || target == "Python.default") {
    header->kind = SectionKind::PythonDomain;
  } else if (target == "Python.punit.thread") {
    header->kind = SectionKind::PythonPunitThread;
  } else if (starts_with(target, "Python.punit.")) {
    error("unknown Python punit kind " + quote(target.substr(13)) + " in [" + std::string(target) +
          "] (expected Python.punit.thread)");
    return false;
  } else if (starts_with(target, "Python.") && target.find('(') != std::string_view::npos) {
    bool has_python = false;
    if (!parse_punit_sets(target, "[" + std::string(target) + "]", &has_python, &header->threads,
                          &header->wildcard)) {
      return false;
    }
    header->kind = SectionKind::PythonThreads;
  } else if (starts_with(target, "Python.") || starts_with(target, "Python(")) {
    error("unknown section kind for Python: [" + std::string(target) +
          "] (expected Python.default, Python.thread(ids) or Python.punit.thread)");
    return false;
  } else {
    const std::string_view domain = target.substr(0, target.find_first_of(".("));
    const bool known =
        is_other_domain(domain) ||
        std::find(std::begin(kServices), std::end(kServices), target) != std::end(kServices) ||
        starts_with(target, "0x") || starts_with(target, "0X");
    if (!known) {
      std::string hint;
      if (iequals(target.substr(0, 6), "python") || iequals(target.substr(0, 7), "lexgion")) {
        hint = " (section names are case-sensitive)";
      }
      warning("unknown section [" + std::string(target) + "]: ignored" + hint);
    }
    return false;  // another domain's or a service's section: skipped silently
  }
  if (header->kind == SectionKind::Skipped) return false;

  // ": Inheritance : PunitSet"
  if (!suffix.empty()) {
    if (suffix.front() != ':') {
      error("unexpected " + quote(suffix) +
            " after ']' (expected [Target] : Inheritance : PunitSet)");
      return false;
    }
    const std::vector<std::string_view> parts = split(suffix.substr(1), ':');
    if (parts.size() > 2) {
      error("too many ':' after ']' (expected [Target] : Inheritance : PunitSet)");
      return false;
    }
    if (!parse_inheritance(parts[0], header)) return false;
    if (parts.size() == 2 && !parts[1].empty()) {
      bool wildcard = false;
      if (!parse_punit_sets(parts[1], "the PunitSet part", &header->has_constraint,
                            &header->constraint, &wildcard)) {
        return false;
      }
    }
  }
  return true;
}

bool Parser::parse_lexgion_header(std::string_view target, Header *header) {
  const size_t close = target.find(')');
  if (close == std::string_view::npos) {
    error("missing ')' in section header [" + std::string(target) + "]");
    return false;
  }
  const std::string_view inner = trim(target.substr(8, close - 8));
  const std::string_view after = target.substr(close + 1);
  if (after == ".default") {
    if (inner == "Python") {
      header->kind = SectionKind::LexgionPython;
    } else if (!is_other_domain(inner)) {
      warning("unknown domain " + quote(inner) + " in [Lexgion(" + std::string(inner) +
              ").default]: section ignored");
    }
    return true;  // Skipped unless Python
  }
  if (inner.empty()) {
    error("empty name list in [" + std::string(target) + "]");
    return false;
  }
  for (std::string_view item : split(inner, ',')) {
    // Empty items and addresses (OpenMP, CUDA) are libpinsight.so's business.
    if (item.empty() || starts_with(item, "0x") || starts_with(item, "0X")) continue;
    std::vector<std::string_view> parts;
    size_t start = 0;
    for (int i = 0; i < 2; ++i) {  // "Domain:file:name": at most three parts
      const size_t colon = item.find(':', start);
      if (colon == std::string_view::npos) break;
      parts.push_back(trim(item.substr(start, colon - start)));
      start = colon + 1;
    }
    parts.push_back(trim(item.substr(start)));

    LexgionTarget lexgion;
    if (parts.size() == 1) {
      lexgion.qualname = std::string(parts[0]);
      if (parts[0] == "Python") {
        warning(
            "[Lexgion(Python)] names a function called 'Python'; "
            "the domain's default is [Lexgion(Python).default]");
      }
    } else if (parts[0] == "Python") {
      lexgion.python_qualified = true;
      if (parts.size() == 3) lexgion.file_hint = std::string(parts[1]);
      lexgion.qualname = std::string(parts.back());
    } else if (is_other_domain(parts[0])) {
      continue;
    } else if (parts.size() == 2) {
      lexgion.file_hint = std::string(parts[0]);
      lexgion.qualname = std::string(parts[1]);
    } else {
      warning("unknown domain " + quote(parts[0]) + " in " + quote(item) + ": ignored");
      continue;
    }
    if (lexgion.qualname.empty()) {
      error("empty function name in " + quote(item) + " of [" + std::string(target) + "]");
      return false;
    }
    if (parts.size() > 1 && !(parts[0] == "Python" && parts.size() == 2) &&
        lexgion.file_hint.empty()) {
      error("empty file name in " + quote(item) + " of [" + std::string(target) + "]");
      return false;
    }
    header->lexgions.push_back(std::move(lexgion));
  }
  if (!after.empty()) {
    if (header->lexgions.empty()) return true;  // Skipped: not ours
    error("unexpected " + quote(after) + " after Lexgion(...) in [" + std::string(target) + "]");
    return false;
  }
  if (!header->lexgions.empty()) header->kind = SectionKind::LexgionNamed;
  return true;
}

// "Python.thread(1-2), MPI.rank(0)": the Python thread sets are united; other
// domains' constraints cannot be evaluated here and are warned about.
bool Parser::parse_punit_sets(std::string_view text, std::string_view context, bool *has_python,
                              ThreadSet *python_threads, bool *wildcard) {
  *has_python = false;
  *wildcard = false;
  ThreadSet united;
  united.everything = false;
  size_t position = 0;
  while (true) {
    while (position < text.size() && (is_blank(text[position]) || text[position] == ',')) {
      ++position;
    }
    if (position >= text.size()) break;
    const size_t open = text.find('(', position);
    const size_t close = open == std::string_view::npos ? open : text.find(')', open);
    const std::string_view head =
        trim(text.substr(position, open == std::string_view::npos ? open : open - position));
    const size_t dot = head.find('.');
    if (open == std::string_view::npos || close == std::string_view::npos ||
        dot == std::string_view::npos) {
      error("expected punit sets such as Python.thread(0-3) in " + std::string(context) + ", got " +
            quote(text.substr(position)));
      return false;
    }
    const std::string_view domain = head.substr(0, dot), kind = head.substr(dot + 1);
    const std::string_view ids = text.substr(open + 1, close - open - 1);
    const std::string_view spec = text.substr(position, close + 1 - position);
    position = close + 1;
    while (position < text.size() && is_blank(text[position])) ++position;
    if (position < text.size() && text[position] != ',') {
      error("expected ',' after " + quote(spec) + " in " + std::string(context));
      return false;
    }
    if (domain == "Python") {
      if (kind != "thread") {
        error("unknown Python punit kind " + quote(kind) + " in " + std::string(context) +
              " (expected Python.thread(ids))");
        return false;
      }
      ThreadSet threads;
      bool star = false;
      if (!parse_thread_ids(ids, &threads, &star)) {
        error("expected thread ids such as 0-3 or 0, 2, 5-7 in " + quote(spec) + ", got " +
              quote(trim(ids)));
        return false;
      }
      *has_python = true;
      *wildcard = *wildcard || star;
      if (threads.everything) {
        united.everything = true;
      } else {
        united.ranges.insert(united.ranges.end(), threads.ranges.begin(), threads.ranges.end());
      }
    } else if (is_other_domain(domain)) {
      warning("punit constraint " + quote(spec) +
              " cannot be checked by pinsight-python: ignored, the section applies to every " +
              std::string(domain) + " " + std::string(kind));
    } else {
      warning("unknown domain " + quote(domain) + " in " + quote(spec) + ": ignored");
    }
  }
  normalize(&united);
  *python_threads = united;
  return true;
}

bool Parser::parse_inheritance(std::string_view text, Header *header) {
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) continue;
    header->has_inheritance = true;
    if (item.find('(') != std::string_view::npos) {
      error("expected Domain.default in the inheritance part, got " + quote(item) +
            " (punit constraints go after a second ':', as in [X] : Python.default : " +
            std::string(item) + ")");
      return false;
    }
    if (item == "Python.default") {
      header->inherit_python = true;
    } else if (item == "Lexgion.default" ||
               (ends_with(item, ".default") && is_other_domain(item.substr(0, item.size() - 8)))) {
      // Lexgion.default: rate settings come from it anyway; other domains: not ours.
    } else {
      warning("unknown inheritance " + quote(item) + " (expected Domain.default): ignored");
    }
  }
  return true;
}

void Parser::apply_header(const Header &header) {
  label_ = "[" + shorten(header.label, 60) + "]";
  current_.clear();
  const auto invalid = [&](const char *advice) {
    warning(std::string(header.action == Action::Reset ? "RESET" : "REMOVE") +
            " is not valid for this section (" + advice + "): " + label_ + " ignored");
    kind_ = SectionKind::NoBody;
  };
  const auto no_inheritance = [&](const char *what) {
    if (header.has_inheritance) {
      warning(std::string(what) + " does not inherit: the inheritance part of " + label_ +
              " is ignored");
    }
    if (header.has_constraint) {
      warning(std::string(what) + " takes no punit constraint: the PunitSet part of " + label_ +
              " is ignored");
    }
  };

  switch (header.kind) {
    case SectionKind::PythonDomain:
      if (header.action == Action::Remove) return invalid("use RESET");
      no_inheritance("[Python.default]");
      if (header.action == Action::Reset) {
        // PInsight's RESET of a domain: install defaults for mode and events;
        // the punit scope is kept.
        mode_ = TraceMode::Tracing;
        domain_events_ = kEventAll;
        kind_ = SectionKind::NoBody;
        return;
      }
      kind_ = SectionKind::PythonDomain;
      return;

    case SectionKind::PythonPunitThread:
      if (header.action != Action::Set) return invalid("set its range instead");
      no_inheritance("[Python.punit.thread]");
      kind_ = SectionKind::PythonPunitThread;
      return;

    case SectionKind::PythonThreads: {
      if (header.action == Action::Reset) return invalid("use REMOVE");
      if (header.action == Action::Remove) {
        kind_ = SectionKind::NoBody;
        if (header.wildcard) {
          if (thread_sections_.empty()) warning("no [Python.thread(...)] section to remove");
          thread_sections_.clear();
          return;
        }
        const auto match = std::find_if(thread_sections_.begin(), thread_sections_.end(),
                                        [&](const ThreadSection &section) {
                                          return same_set(section.threads, header.threads);
                                        });
        if (match == thread_sections_.end()) {
          warning("no section with the same threads above: " + label_ + " removes nothing");
        } else {
          thread_sections_.erase(match);
        }
        return;
      }
      if (header.wildcard) {
        warning("Python.thread(*) is only valid with REMOVE: " + label_ + " ignored");
        kind_ = SectionKind::NoBody;
        return;
      }
      const ThreadSet threads =
          header.has_constraint ? intersect(header.threads, header.constraint) : header.threads;
      auto match = std::find_if(
          thread_sections_.begin(), thread_sections_.end(),
          [&](const ThreadSection &section) { return same_set(section.threads, threads); });
      if (match == thread_sections_.end()) {
        // A thread section starts from the domain's events, as if it inherited
        // Python.default (PInsight would start from no event at all).
        thread_sections_.push_back({threads, domain_events_, line_});
        match = thread_sections_.end() - 1;
      } else if (header.inherit_python) {
        match->events = domain_events_;
      }
      current_ = {static_cast<size_t>(match - thread_sections_.begin())};
      kind_ = SectionKind::PythonThreads;
      return;
    }

    case SectionKind::LexgionGlobal:
    case SectionKind::LexgionPython: {
      const bool global = header.kind == SectionKind::LexgionGlobal;
      if (header.action == Action::Remove) return invalid("use RESET");
      if (header.has_constraint) {
        warning("default lexgion sections take no punit constraint: the PunitSet part of " +
                label_ + " is ignored");
      }
      if (header.action == Action::Reset) {
        if (global) {
          global_ = builtin_lexgion();
        } else {
          python_default_given_ = false;  // computed again from [Lexgion.default]
        }
        kind_ = SectionKind::NoBody;
        return;
      }
      LexgionSettings &settings = global ? global_ : python_default_;
      const char *section = global ? "Lexgion.default" : "Lexgion(Python).default";
      if (!global && !python_default_given_) {
        python_default_ = global_;  // PInsight: Lexgion.default (+) Python.default
        python_default_given_ = true;
        python_default_.line = 0;
      }
      if (settings.section != section || settings.line == 0) {
        settings.section = section;
        settings.line = line_;
      }
      if (header.inherit_python) {
        settings.events = domain_events_;
        settings.events_given = true;
      }
      kind_ = header.kind;
      return;
    }

    case SectionKind::LexgionNamed: {
      if (header.action == Action::Reset) return invalid("use REMOVE");
      if (header.action == Action::Remove) {
        kind_ = SectionKind::NoBody;
        for (const LexgionTarget &target : header.lexgions) {
          const auto match = std::find_if(named_.begin(), named_.end(), [&](const NamedLexgion &n) {
            return n.qualname == target.qualname && n.file_hint == target.file_hint &&
                   n.python_qualified == target.python_qualified;
          });
          if (match == named_.end()) {
            NamedLexgion shown{target.qualname, target.file_hint, target.python_qualified, {}};
            warning("no [" + lexgion_label(shown) + "] section above: nothing to remove");
          } else {
            named_.erase(match);
          }
        }
        return;
      }
      for (const LexgionTarget &target : header.lexgions) {
        auto match = std::find_if(named_.begin(), named_.end(), [&](const NamedLexgion &n) {
          return n.qualname == target.qualname && n.file_hint == target.file_hint &&
                 n.python_qualified == target.python_qualified;
        });
        if (match == named_.end()) {
          // A new named lexgion is a snapshot of [Lexgion.default] (PInsight).
          NamedLexgion named{target.qualname, target.file_hint, target.python_qualified, global_};
          named.settings.section = lexgion_label(named);
          named.settings.line = line_;
          named_.push_back(std::move(named));
          match = named_.end() - 1;
        }
        if (header.inherit_python) {
          match->settings.events = domain_events_;
          match->settings.events_given = true;
        }
        if (header.has_constraint) match->settings.threads = header.constraint;
        current_.push_back(static_cast<size_t>(match - named_.begin()));
      }
      kind_ = SectionKind::LexgionNamed;
      return;
    }

    case SectionKind::None:
    case SectionKind::Skipped:
    case SectionKind::NoBody:
      break;
  }
  kind_ = SectionKind::Skipped;
}

void Parser::key(const char * /*section*/, const char *raw_name, const char *raw_value) {
  const auto restore = [this](const char *text) -> std::string {
    if (text[0] == '\x01') return long_text_[std::strtoul(text + 1, nullptr, 10)];
    return text;
  };
  const std::string name = restore(raw_name), value = restore(raw_value);
  switch (kind_) {
    case SectionKind::None:
      warning("key " + quote(name) + " is outside any section: ignored");
      return;
    case SectionKind::Skipped:
      return;
    case SectionKind::NoBody:
      warning("key " + quote(name) + " ignored: " + label_ + " takes no keys");
      return;
    case SectionKind::PythonDomain:
      return python_domain_key(name, value);
    case SectionKind::PythonPunitThread:
      if (name == "range") {
        bool wildcard;
        if (!parse_thread_ids(value, &scope_, &wildcard)) {
          error("range: expected a thread range such as 0-3 or 0, 2, 5-7, got " + quote(value));
        }
      } else {
        warning("unknown key " + quote(name) + " in " + label_ + " (expected range): ignored");
      }
      return;
    case SectionKind::PythonThreads:
      return thread_section_key(name, value);
    case SectionKind::LexgionGlobal:
    case SectionKind::LexgionPython:
    case SectionKind::LexgionNamed:
      return lexgion_key(name, value);
  }
}

bool Parser::event_key(std::string_view key, std::string_view value, bool *valid, bool *on) {
  const uint32_t bits = pysysmon_event_bits(key);
  if (bits == 0) return false;
  *valid = parse_switch(value, on);
  if (!*valid) {
    error(std::string(key) + ": expected on or off (or true/false, 1/0), got " + quote(value));
  }
  return true;
}

void Parser::apply_event_key(std::string_view key, std::string_view value, uint32_t *mask) {
  bool valid, on;
  if (!event_key(key, value, &valid, &on) || !valid) return;
  const uint32_t bits = pysysmon_event_bits(key);
  *mask = on ? (*mask | bits) : (*mask & ~bits);
}

bool Parser::events_list(std::string_view value, uint32_t *mask) {
  uint32_t parsed = 0;
  const std::vector<std::string_view> names = split(value, ',');
  for (std::string_view name : names) {
    const auto matches = [name](const EventName &event) { return event.name == name; };
    const EventName *event =
        std::find_if(std::begin(kEventListNames), std::end(kEventListNames), matches);
    uint32_t bits;
    if (event != std::end(kEventListNames)) {
      bits = event->bits;
    } else if ((bits = pysysmon_event_bits(name)) == 0) {
      std::vector<std::string_view> names;
      for (const EventName &known : kEventListNames) names.push_back(known.name);
      error("events: unknown event " + quote(name) +
            " (expected function, c_call, import, alloc, function_begin, function_end, "
            "c_call_begin, c_call_end, all or none)" +
            did_you_mean(name, names));
      return false;
    }
    parsed |= bits;
  }
  *mask = parsed;
  return true;
}

void Parser::module_list(std::string_view key, std::string_view value) {
  const bool filter = key == "module_filter";
  std::vector<std::string> &list = filter ? module_filter_ : module_exclude_;
  bool &seen = filter ? module_filter_seen_ : module_exclude_seen_;
  if (!seen) list.clear();  // replaces what a previous configuration had
  seen = true;
  for (std::string_view name : split(value, ',')) {
    bool valid = !name.empty() && name.front() != '.' && name.back() != '.' &&
                 name.find("..") == std::string_view::npos;
    for (char c : name) {
      const auto byte = static_cast<unsigned char>(c);
      valid = valid && (std::isalnum(byte) || c == '_' || c == '.' || byte >= 0x80);
    }
    if (!valid) {
      error(std::string(key) + ": expected module names such as numpy or numpy.linalg, got " +
            quote(name) + " (a name matches the module and its submodules; no wildcards)");
      return;
    }
    if (std::find(list.begin(), list.end(), name) == list.end()) list.emplace_back(name);
  }
}

void Parser::python_domain_key(std::string_view key, std::string_view value) {
  if (key == "trace_mode") {
    if (!parse_trace_mode(value, &mode_)) {
      error("unknown trace_mode " + quote(value) +
            " (expected OFF, STANDBY, MONITORING or TRACING)");
    }
  } else if (key == "Python.thread") {
    bool wildcard;
    if (!parse_thread_ids(value, &scope_, &wildcard)) {
      error("Python.thread: expected a thread range such as (0-3) or (0, 2, 5-7), got " +
            quote(value));
    }
  } else if (key == "events") {
    events_list(value, &domain_events_);
  } else if (key == "alloc_sample_interval") {
    if (!parse_byte_size(value, &alloc_sample_interval_)) {
      error(
          "alloc_sample_interval: expected a size in bytes > 0 such as 524288, 512KiB or 1MiB, "
          "got " +
          quote(value));
    }
  } else if (key == "module_filter" || key == "module_exclude") {
    module_list(key, value);
  } else if (pysysmon_event_bits(key) != 0) {
    apply_event_key(key, value, &domain_events_);
  } else if (is_lexgion_key(key)) {
    warning(quote(key) + " belongs in a [Lexgion...] section such as [Lexgion.default]: " +
            "ignored in " + label_);
  } else if (starts_with(key, "Python.")) {
    warning("unknown Python punit kind " + quote(key.substr(7)) + " in " + label_ +
            " (expected Python.thread): ignored");
  } else if (key.find('.') != std::string_view::npos) {
    warning(quote(key) + " does not belong in " + label_ + ": ignored");
  } else {
    warning("unknown key " + quote(key) + " in " + label_ + ": ignored" +
            did_you_mean(key, kKnownKeys));
  }
}

void Parser::thread_section_key(std::string_view key, std::string_view value) {
  uint32_t &events = thread_sections_[current_.front()].events;
  if (key == "events") {
    events_list(value, &events);
  } else if (pysysmon_event_bits(key) != 0) {
    apply_event_key(key, value, &events);
  } else if (key == "trace_mode") {
    warning("trace_mode is domain-wide: set it in [Python.default]; ignored in " + label_);
  } else {
    warning("unknown key " + quote(key) + " in " + label_ + ": ignored" +
            did_you_mean(key, kKnownKeys));
  }
}

std::vector<LexgionSettings *> Parser::current_lexgions() {
  if (kind_ == SectionKind::LexgionGlobal) return {&global_};
  if (kind_ == SectionKind::LexgionPython) return {&python_default_};
  std::vector<LexgionSettings *> targets;
  for (size_t index : current_) targets.push_back(&named_[index].settings);
  return targets;
}

void Parser::lexgion_key(std::string_view key, std::string_view value) {
  const std::vector<LexgionSettings *> targets = current_lexgions();
  struct IntegerKey {
    std::string_view name;
    int64_t minimum;
    int64_t LexgionSettings::*field;
  };
  static constexpr IntegerKey kIntegerKeys[] = {
      {"trace_starts_at", 0, &LexgionSettings::trace_starts_at},
      {"max_num_traces", -1, &LexgionSettings::max_num_traces},
      {"tracing_rate", 1, &LexgionSettings::tracing_rate},
  };
  for (const IntegerKey &integer : kIntegerKeys) {
    if (key != integer.name) continue;
    int64_t parsed;
    if (!parse_int64(value, &parsed) || parsed < integer.minimum) {
      error(std::string(key) + ": expected an integer >= " + std::to_string(integer.minimum) +
            ", got " + quote(value));
      return;
    }
    for (LexgionSettings *settings : targets) settings->*integer.field = parsed;
    return;
  }

  if (key == "window_end_action" || key == "trace_mode_after") {
    WindowEndAction action;
    if (window_end_action(key, value, &action)) {
      for (LexgionSettings *settings : targets) settings->window_end = action;
    }
  } else if (key == "window_timeout") {
    double seconds;
    if (!parse_seconds(value, &seconds)) {
      error("window_timeout: expected a number of seconds, got " + quote(value));
      return;
    }
    if (kind_ != SectionKind::LexgionGlobal) {
      warning(
          "window_timeout only takes effect in [Lexgion.default] (one process-wide timer): "
          "ignored in " +
          label_);
    }
    for (LexgionSettings *settings : targets) settings->window_timeout_s = std::max(seconds, 0.0);
  } else if (key == "window_end_trigger") {
    if (trim(value) != "first") {
      warning("window_end_trigger = " + std::string(trim(value)) +
              " is not supported yet: the window ends when the first lexgion reaches "
              "max_num_traces (first)");
    }
  } else if (key == "events") {
    uint32_t events;
    if (!events_list(value, &events)) return;
    for (LexgionSettings *settings : targets) {
      settings->events = events;
      settings->events_given = true;
    }
  } else if (pysysmon_event_bits(key) != 0) {
    bool valid, on;
    event_key(key, value, &valid, &on);
    if (!valid) return;
    const uint32_t bits = pysysmon_event_bits(key);
    for (LexgionSettings *settings : targets) {
      // An event key applies on top of the domain's events as of this line.
      const uint32_t events = settings->events_given ? settings->events : domain_events_;
      settings->events = on ? (events | bits) : (events & ~bits);
      settings->events_given = true;
    }
  } else if (key == "trace_mode") {
    warning("trace_mode is domain-wide: set it in [Python.default]; ignored in " + label_);
  } else if (key.find('.') != std::string_view::npos &&
             is_other_domain(key.substr(0, key.find('.')))) {
    // "OpenMP.omp_thread_begin = on" in a shared lexgion section: libpinsight.so's.
  } else {
    warning("unknown key " + quote(key) + " in " + label_ + ": ignored" +
            did_you_mean(key, kKnownKeys));
  }
}

// "MONITORING", "Python:MONITORING, OpenMP:TRACING", "INTROSPECT:60:script.sh:TRACING".
bool Parser::window_end_action(std::string_view key, std::string_view value, WindowEndAction *out) {
  const std::string what(key);
  value = trim(value);
  const auto bad_mode = [&](std::string_view mode) {
    error(what + ": unknown mode " + quote(mode) +
          " (expected OFF, STANDBY, MONITORING or TRACING)");
    return false;
  };
  WindowEndAction action;
  std::string_view modes = value;
  if (value.size() >= 11 && iequals(value.substr(0, 11), "INTROSPECT:")) {
    const std::string_view rest = value.substr(11);
    const size_t pause_end = rest.find(':');
    int64_t pause;
    if (pause_end == std::string_view::npos || !parse_int64(rest.substr(0, pause_end), &pause) ||
        trim(rest.substr(pause_end + 1)).empty()) {
      error(what + ": expected INTROSPECT:pause:script[:modes] with a pause in seconds, got " +
            quote(value));
      return false;
    }
    const std::string_view script = rest.substr(pause_end + 1);
    const size_t script_end = script.find(':');
    modes =
        script_end == std::string_view::npos ? std::string_view() : script.substr(script_end + 1);
    action.introspect = true;
  } else if (value.empty()) {
    error(what +
          ": expected a mode (OFF, STANDBY, MONITORING or TRACING), a Domain:MODE list "
          "or INTROSPECT:pause:script[:modes], got ''");
    return false;
  }

  for (std::string_view item : split(modes, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    TraceMode mode;
    if (colon == std::string_view::npos) {
      if (!parse_trace_mode(item, &mode)) return bad_mode(item);
      action.has_python_mode = true;  // shorthand: every domain
      action.python_mode = mode;
      continue;
    }
    const std::string_view domain = trim(item.substr(0, colon));
    const std::string_view target = trim(item.substr(colon + 1));
    if (domain == "Python") {
      if (starts_with(target, "device_activity")) {
        warning(what + ": Python has no device_activity: " + quote(item) + " ignored");
        continue;
      }
      if (!parse_trace_mode(target, &mode)) return bad_mode(target);
      action.has_python_mode = true;
      action.python_mode = mode;
    } else if (!is_other_domain(domain)) {
      warning(what + ": unknown domain " + quote(domain) + ": ignored");
    }
  }
  if (action.introspect) {
    if (modes.empty()) {  // PInsight's default resume mode
      action.has_python_mode = true;
      action.python_mode = TraceMode::Monitoring;
    }
    warning(what +
            " INTROSPECT is not supported yet by pinsight-python: no pause, script or "
            "trace rotation happens; when the window ends " +
            (action.has_python_mode
                 ? std::string("Python switches to ") + trace_mode_name(action.python_mode)
                 : std::string("Python's mode does not change")));
  }
  *out = action;
  return true;
}

std::unique_ptr<Config> Parser::finish() {
  auto impl = std::make_shared<Config::Impl>();
  impl->global_default = global_;
  if (python_default_given_) {
    impl->python_default = python_default_;
  } else {
    impl->python_default = global_;  // PInsight fills Lexgion(Python).default so
  }
  impl->named = std::move(named_);
  for (size_t i = 0; i < impl->named.size(); ++i) {
    impl->named_by_qualname[impl->named[i].qualname].push_back(i);
  }
  impl->thread_sections = std::move(thread_sections_);
  impl->scope = scope_;
  impl->domain_events = domain_events_;
  impl->build_thread_table();

  auto config = std::make_unique<Config>();
  config->path = name_;
  config->mode = mode_;
  config->events = domain_events_;
  config->alloc_sample_interval = alloc_sample_interval_;
  config->threads = scope_;
  config->module_filter = std::move(module_filter_);
  config->module_exclude = std::move(module_exclude_);
  config->window_timeout_s = global_.window_timeout_s;
  config->window_timeout_action = global_.window_end;
  config->impl = impl;

  // Per-lexgion facts the hot path should not have to work out.
  const auto settle = [&config](LexgionSettings &settings) {
    uint32_t any = 0;
    for (int id : representative_threads(*config, settings)) {
      any |= config->events_for(settings, id);
    }
    // import and alloc events do not come from a function's own executions.
    settings.never_traced = settings.max_num_traces == 0 || (any & kEventCallStack) == 0;
    return settings.never_traced ? 0 : any;
  };
  // [Lexgion.default] reaches code objects only through the Python default.
  settle(impl->global_default);
  uint32_t possible = settle(impl->python_default);
  for (NamedLexgion &named : impl->named) possible |= settle(named.settings);
  config->events_possible = possible;
  return config;
}

// Does `filename` match the file part of [Lexgion(Python:file:qualname)]?
bool file_hint_matches(std::string_view hint, std::string_view filename) {
  if (filename == hint) return true;
  const size_t slash = filename.find_last_of('/');
  const std::string_view base =
      slash == std::string_view::npos ? filename : filename.substr(slash + 1);
  if (base == hint) return true;
  if (ends_with(base, ".py") && base.substr(0, base.size() - 3) == hint) return true;  // stem
  if (hint.find('/') != std::string_view::npos && filename.size() > hint.size() &&
      ends_with(filename, hint) && filename[filename.size() - hint.size() - 1] == '/') {
    return true;  // "pkg/solver.py" matches ".../pkg/solver.py"
  }
  return false;
}

ParseResult parse_text(const std::string &text, const std::string &name, const Config *previous) {
  return Parser(text, name, previous).run();
}

ParseResult read_and_parse(const std::string &path, const Config *previous) {
  constexpr size_t kMaxFileSize = 16 << 20;
  const auto fail = [&path](std::string message) {
    ParseResult result;
    result.errors.push_back({path, 0, std::move(message)});
    return result;
  };
  // O_NONBLOCK: opening a FIFO would wait for a writer (for ever, at the program's
  // start); only a regular file is a configuration, so look before reading.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open the file: ") + std::strerror(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int stat_errno = errno;
    close(fd);
    return fail(std::string("cannot read the file: ") + std::strerror(stat_errno));
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return fail(S_ISDIR(info.st_mode) ? "is a directory, not a configuration file"
                                      : "not a regular file (a FIFO or a device): refused, "
                                        "a trace configuration must be a regular file");
  }
  FILE *file = fdopen(fd, "rb");
  if (file == nullptr) {
    close(fd);
    return fail(std::string("cannot open the file: ") + std::strerror(errno));
  }
  std::string text;
  char chunk[65536];
  size_t count;
  while ((count = std::fread(chunk, 1, sizeof chunk, file)) > 0) {
    text.append(chunk, count);
    if (text.size() > kMaxFileSize) {
      std::fclose(file);
      return fail("the file is larger than 16 MiB: not a trace configuration");
    }
  }
  const int read_errno = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (read_errno != 0)
    return fail(std::string("cannot read the file: ") + std::strerror(read_errno));
  return parse_text(text, path, previous);
}

}  // namespace

// ---------------------------------------------------------------------------
// Config queries

CodeDecision Config::decide_code(std::string_view qualname, std::string_view filename,
                                 std::string_view module) const {
  CodeDecision decision;
  decision.module_selected = pinsight::module_selected(module, module_filter, module_exclude);
  if (!impl) {
    decision.lexgion = &builtin_lexgion();
    return decision;
  }
  decision.lexgion = &impl->python_default;
  const auto found = impl->named_by_qualname.find(std::string(qualname));
  if (found != impl->named_by_qualname.end()) {
    // The most specific match wins: a file part, then "Python:", then file order.
    int best_rank = -1;
    for (size_t index : found->second) {
      const NamedLexgion &named = impl->named[index];
      if (!named.file_hint.empty() && !file_hint_matches(named.file_hint, filename)) continue;
      const int rank = (named.file_hint.empty() ? 0 : 2) + (named.python_qualified ? 1 : 0);
      if (rank > best_rank) {
        best_rank = rank;
        decision.lexgion = &named.settings;
      }
    }
  }
  return decision;
}

uint32_t Config::events_for(const LexgionSettings &lexgion, int python_thread_id) const {
  const uint32_t slot = impl ? impl->thread_slot(python_thread_id)
                             : (threads.contains(python_thread_id) ? kAdmitted | events : 0);
  if (!(slot & kAdmitted)) return 0;
  if (!lexgion.threads.everything && !lexgion.threads.contains(python_thread_id)) return 0;
  return lexgion.events_given ? lexgion.events : slot & ~kAdmitted;
}

const LexgionSettings &Config::lexgion_default() const {
  return impl ? impl->global_default : builtin_lexgion();
}

const LexgionSettings &Config::python_lexgion_default() const {
  return impl ? impl->python_default : builtin_lexgion();
}

const std::vector<NamedLexgion> &Config::named_lexgions() const {
  return impl ? impl->named : kNoNamed;
}

const std::vector<ThreadSection> &Config::thread_sections() const {
  return impl ? impl->thread_sections : kNoThreadSections;
}

ParseResult parse_config_file(const std::string &path) { return read_and_parse(path, nullptr); }

ParseResult parse_config_file(const std::string &path, const Config *previous) {
  return read_and_parse(path, previous);
}

ParseResult parse_config_string(const std::string &text, const std::string &name) {
  return parse_text(text, name, nullptr);
}

ParseResult parse_config_string(const std::string &text, const std::string &name,
                                const Config *previous) {
  return parse_text(text, name, previous);
}

std::unique_ptr<Config> default_config() {
  ParseResult result = parse_text("", "", nullptr);
  return std::move(result.config);
}

}  // namespace pinsight
