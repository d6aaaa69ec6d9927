// The configuration model's queries: which lexgion governs a code object,
// which events a thread emits (hot path's slow side), and the small public
// pieces of config.h. The parser is in parser.cpp.
#include "config/config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/module_names.h"
#include "config/config_impl.h"
#include "config/text.h"

namespace pinsight {

// ---------------------------------------------------------------------------
// Small public pieces

const char *trace_mode_name(TraceMode mode) {
  const auto index = static_cast<size_t>(mode);
  // Literals: null-terminated.
  return index < std::size(kTraceModeNames) ? kTraceModeNames[index].data() : "TRACING";
}

bool parse_trace_mode(std::string_view text, TraceMode *out) {
  text = config_detail::trim(text);
  for (size_t i = 0; i < std::size(kTraceModeNames); ++i) {
    if (config_detail::iequals(text, kTraceModeNames[i])) {
      *out = static_cast<TraceMode>(i);
      return true;
    }
  }
  return false;
}

const char *payload_name(Payload payload) {
  const auto index = static_cast<size_t>(payload);
  return index < std::size(kPayloadNames) ? kPayloadNames[index].data() : "full";
}

bool parse_payload(std::string_view text, Payload *out) {
  text = config_detail::trim(text);
  for (size_t i = 0; i < std::size(kPayloadNames); ++i) {
    if (config_detail::iequals(text, kPayloadNames[i])) {
      *out = static_cast<Payload>(i);
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

namespace config_detail {

const LexgionSettings &builtin_lexgion() {
  static const LexgionSettings settings = [] {
    LexgionSettings s;
    s.section = "default";
    return s;
  }();
  return settings;
}

}  // namespace config_detail

namespace {

using config_detail::builtin_lexgion;
using config_detail::ends_with;
using config_detail::kAdmitted;

const std::vector<NamedLexgion> kNoNamed;
const std::vector<ThreadSection> kNoThreadSections;

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

}  // namespace pinsight
