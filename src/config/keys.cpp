// Keys of the sections: the Python domain's, [Python.thread(...)]'s and the
// lexgions' (rate control, events, window end actions).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/parser.h"

namespace pinsight::config_detail {

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
            " (expected function, c_call, import, alloc, gil, function_begin, function_end, "
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
  if (!seen) list.clear();  // the first occurrence in this file starts the list
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

// The enumerated values (config.h's lists), for "did you mean" (the same on
// start-up and reload).
constexpr const auto &kModeNames = kTraceModeNames;

void Parser::python_domain_key(std::string_view key, std::string_view value) {
  if (key == "trace_mode") {
    if (!parse_trace_mode(value, &mode_)) {
      error("unknown trace_mode " + quote(value) + " (expected " + expected_names(kModeNames) +
            ")" + did_you_mean(value, kModeNames));
    }
  } else if (key == "Python.thread") {
    bool wildcard;
    if (!parse_thread_ids(value, &scope_, &wildcard)) {
      error("Python.thread: expected a thread range such as (0-3) or (0, 2, 5-7), got " +
            quote(value));
    }
  } else if (key == "events") {
    events_list(value, &domain_events_);
  } else if (key == "payload") {
    if (!parse_payload(value, &payload_)) {
      error("unknown payload " + quote(value) + " (expected " + expected_names(kPayloadNames) +
            ")" + did_you_mean(value, kPayloadNames));
    }
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
    WindowEndTrigger trigger;
    const std::string_view name = trim(value);
    if (iequals(name, "first")) {
      trigger = WindowEndTrigger::First;
    } else if (iequals(name, "all")) {
      trigger = WindowEndTrigger::All;
      if (trigger_all_line_ == 0) trigger_all_line_ = line_;
    } else if (iequals(name, "anchor")) {
      // Reserved by PInsight, without semantics yet.
      warning(
          "window_end_trigger = anchor is not supported yet: the window ends when the "
          "first lexgion reaches max_num_traces (first)");
      trigger = WindowEndTrigger::First;
    } else {
      error("window_end_trigger: expected first or all, got " + quote(value));
      return;
    }
    for (LexgionSettings *settings : targets) settings->window_end_trigger = trigger;
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
    error(what + ": unknown mode " + quote(mode) + " (expected " + expected_names(kModeNames) +
          ")" + did_you_mean(mode, kModeNames));
    return false;
  };
  WindowEndAction action;
  std::string_view modes = value;
  if (value.size() >= 11 && iequals(value.substr(0, 11), "INTROSPECT:")) {
    const std::string_view rest = value.substr(11);
    const size_t pause_end = rest.find(':');
    double pause;
    if (pause_end == std::string_view::npos || !parse_seconds(rest.substr(0, pause_end), &pause) ||
        trim(rest.substr(pause_end + 1)).empty()) {
      error(what +
            ": expected INTROSPECT:pause:script[:modes] with a pause in seconds (0: none, "
            "-1: until SIGUSR1) and a script ('-': none), got " +
            quote(value));
      return false;
    }
    const std::string_view after_pause = rest.substr(pause_end + 1);
    const size_t script_end = after_pause.find(':');
    const std::string_view script = trim(after_pause.substr(0, script_end));
    modes = script_end == std::string_view::npos ? std::string_view()
                                                 : after_pause.substr(script_end + 1);
    action.introspect = true;
    action.introspect_pause_s = pause;
    action.introspect_script = script == "-" ? std::string() : std::string(script);
  } else if (value.empty()) {
    error(what + ": expected a mode (" + expected_names(kModeNames) +
          "), a Domain:MODE list or INTROSPECT:pause:script[:modes], got ''");
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
  if (action.introspect && modes.empty()) {  // PInsight's default resume mode
    action.has_python_mode = true;
    action.python_mode = TraceMode::Monitoring;
  }
  *out = action;
  return true;
}

}  // namespace pinsight::config_detail
