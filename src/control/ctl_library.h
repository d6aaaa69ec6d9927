// The liblttng-ctl this module runs with, which need not be the version of the
// headers it was built against (Debian 12's, LTTng 2.13): a later LTTng's library
// on LD_LIBRARY_PATH loads in its place (the same soname, liblttng-ctl.so.0).
// Functions added since 2.13 are found in that library at run time, never linked.
#pragma once

#include <string>

namespace pinsight_control {

struct CtlLibrary {
  std::string path;  // the loaded liblttng-ctl.so.0, as the loader found it
  // The LTTng release its functions say it is at least: 13 (2.13 or earlier),
  // 14, 15, 16 (each found by a function that release added).
  int minor = 13;
  // "LTTng 2.16", "LTTng 2.13 or earlier".
  std::string version() const;
};

const CtlLibrary &ctl_library();

// A function of the loaded liblttng-ctl by name, or nullptr where it has none.
void *ctl_function(const char *name);

}  // namespace pinsight_control
