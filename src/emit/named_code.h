// What the emitter writes of a code object: its identity and names, and the
// naming epoch in which its code_info last went out (every payload). The
// tracer's per-code state (tracer/code_info.h) is one.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "common/compat.h"
#include "emit/event_text.h"

namespace pinsight {

// A code object's names, and the same as events carry them: set together, so
// that the two never disagree.
class CodeNames {
 public:
  void set(std::string qualname, std::string filename) {
    qualname_ = std::move(qualname);
    filename_ = std::move(filename);
    cut_qualname_ = cut(qualname_);
    cut_filename_ = cut(filename_);
  }
  // The code's own, which the configuration's sections match.
  const std::string &qualname() const { return qualname_; }
  const std::string &filename() const { return filename_; }
  // In every event: cut past event_text::kNameBytes.
  const char *event_qualname() const {
    return cut_qualname_.empty() ? qualname_.c_str() : cut_qualname_.c_str();
  }
  const char *event_filename() const {
    return cut_filename_.empty() ? filename_.c_str() : cut_filename_.c_str();
  }

 private:
  static std::string cut(const std::string &name) {
    return name.size() > emitter::event_text::kNameBytes ? emitter::event_text::cut_middle(name)
                                                         : std::string();
  }
  std::string qualname_;
  std::string filename_;
  std::string cut_qualname_;  // empty: the name fits
  std::string cut_filename_;
};

// The two fields every record reads come first: the tracer's per-code state
// puts its hot fields right after them (tracer/code_info.h).
struct NamedCode {
  PyObject *code = nullptr;  // borrowed: the identity written as code_id
  uint32_t named_epoch = 0;  // 0: never named
  int lineno = 0;
  CodeNames names;
};

}  // namespace pinsight
