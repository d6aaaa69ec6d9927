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
#include "config/parser.h"

#include <fcntl.h>
#include <ini.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "config/config_impl.h"

namespace pinsight {
namespace config_detail {
namespace {

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

}  // namespace

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
  result.native_keys = std::move(native_keys_);
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
  // Another domain's keys are libpinsight.so's to judge: only noted.
  if (line.front() != '[' && kind_ == SectionKind::Skipped) {
    const size_t separator = line.find_first_of("=:");
    if (separator != std::string_view::npos && !skipped_section_.empty()) {
      native_keys_[skipped_section_].emplace_back(trim(line.substr(0, separator)));
    }
    return "";
  }
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
  const size_t close = text.find(']');
  skipped_section_ = kind_ == SectionKind::Skipped && close != std::string_view::npos
                         ? std::string(trim(text.substr(1, close - 1)))
                         : std::string();
  // The section name inih passes back is not used: the current section is
  // known here, and a name could be too long for inih.
  return "[s]";
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

std::unique_ptr<Config> Parser::finish() {
  if (trigger_all_line_ > 0 && global_.window_timeout_s <= 0) {
    // PInsight's never-fires guard, at the line that asked for `all`.
    warnings_.push_back(
        {name_, trigger_all_line_,
         "window_end_trigger = all without a window_timeout in [Lexgion.default]: the "
         "window never ends while a function a thread ran stays below its max_num_traces "
         "(one called rarely, or never again); set window_timeout as a bound"});
  }
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
  config->payload = payload_;
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

}  // namespace config_detail

namespace {

ParseResult parse_text(const std::string &text, const std::string &name) {
  return config_detail::Parser(text, name).run();
}

ParseResult read_and_parse(const std::string &path) {
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
  return parse_text(text, path);
}

}  // namespace

ParseResult parse_config_file(const std::string &path) { return read_and_parse(path); }

ParseResult parse_config_string(const std::string &text, const std::string &name) {
  return parse_text(text, name);
}

std::unique_ptr<Config> default_config() {
  ParseResult result = parse_text("", "");
  return std::move(result.config);
}

}  // namespace pinsight
