#include "code_location.h"

#include <sys/stat.h>

#include <cctype>

namespace pinsight_reader {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool is_file(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// "json/decoder.py" -> "json.decoder"; "json/__init__.py" -> "json".
std::string dotted(std::string_view relative) {
  for (std::string_view ext : {".py", ".pyc", ".pyw"}) {
    if (ends_with(relative, ext)) {
      relative.remove_suffix(ext.size());
      break;
    }
  }
  if (ends_with(relative, "/__init__")) relative.remove_suffix(9);
  std::string out(relative);
  for (char &c : out) {
    if (c == '/') c = '.';
  }
  return out;
}

// The position after "/lib/pythonX.Y/" (or "/lib/pythonX.Y[t]/"), or npos.
size_t stdlib_prefix_end(std::string_view path) {
  size_t at = path.rfind("/lib/python");
  while (at != std::string_view::npos) {
    size_t i = at + 11;
    size_t digits_start = i;
    while (i < path.size() && (std::isdigit(static_cast<unsigned char>(path[i])) || path[i] == '.'))
      ++i;
    if (i < path.size() && path[i] == 't') ++i;  // free-threaded builds' lib/python3.13t
    if (i > digits_start && i < path.size() && path[i] == '/') return i + 1;
    if (at == 0) break;
    at = path.rfind("/lib/python", at - 1);
  }
  return std::string_view::npos;
}

}  // namespace

const char *origin_name(CodeOrigin origin) {
  switch (origin) {
    case CodeOrigin::Program:
      return "program";
    case CodeOrigin::Library:
      return "library";
    case CodeOrigin::Stdlib:
      return "stdlib";
    case CodeOrigin::Frozen:
      return "frozen";
    case CodeOrigin::Native:
      return "native";
    case CodeOrigin::Unknown:
      break;
  }
  return "unknown";
}

CodeLocation locate_code(std::string_view filename) {
  if (filename.size() > 9 && filename.substr(0, 8) == "<frozen " && filename.back() == '>') {
    return {std::string(filename.substr(8, filename.size() - 9)), CodeOrigin::Frozen};
  }
  // Source given to Python as text: `python -c`, a script piped in, the
  // interactive prompt, and exec()/compile() of a string. The program's, named
  // by that filename.
  for (std::string_view text : {"<string>", "<stdin>", "<console>"}) {
    if (filename == text) return {std::string(text), CodeOrigin::Program};
  }
  if (filename.empty() || filename.front() == '<') return {"", CodeOrigin::Unknown};
  for (std::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    size_t at = filename.rfind(marker);
    if (at != std::string_view::npos) {
      return {dotted(filename.substr(at + marker.size())), CodeOrigin::Library};
    }
  }
  size_t stdlib = stdlib_prefix_end(filename);
  if (stdlib != std::string_view::npos) {
    return {dotted(filename.substr(stdlib)), CodeOrigin::Stdlib};
  }
  // The program's own file: its stem, then each enclosing package.
  std::string_view path = filename;
  size_t slash = path.rfind('/');
  std::string module = dotted(slash == std::string_view::npos ? path : path.substr(slash + 1));
  if (ends_with(path, "/__init__.py") && slash != std::string_view::npos) {
    path = path.substr(0, slash);  // a package's own file: named after its directory
    slash = path.rfind('/');
    module = std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
  }
  while (slash != std::string_view::npos && slash > 0) {
    std::string_view dir = path.substr(0, slash);
    if (!is_file(std::string(dir) + "/__init__.py")) break;
    size_t parent = dir.rfind('/');
    module =
        std::string(parent == std::string_view::npos ? dir : dir.substr(parent + 1)) + "." + module;
    path = dir;
    slash = parent;
  }
  return {module, CodeOrigin::Program};
}

}  // namespace pinsight_reader
