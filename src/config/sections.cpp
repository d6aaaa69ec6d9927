// Section headers: "[ACTION target] : Inheritance : PunitSet" parsed into a
// Header, then applied to the parser's state (PInsight's snapshot inheritance).
#include <climits>
#include <string>
#include <string_view>

#include "config/parser.h"

namespace pinsight::config_detail {

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

}  // namespace pinsight::config_detail
