#include "ctl_library.h"

#include <dlfcn.h>
#include <lttng/lttng.h>

namespace pinsight_control {
namespace {

// liblttng-ctl is a dependency of this module, loaded RTLD_LOCAL with it: a
// global dlsym does not see it, its own handle does.
void *ctl_handle(std::string *path) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&lttng_session_daemon_alive), &info) == 0 ||
      info.dli_fname == nullptr) {
    return nullptr;
  }
  if (path != nullptr) *path = info.dli_fname;
  return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);  // a reference, never closed
}

// A function each release added to liblttng-ctl, newest first.
struct Marker {
  int minor;
  const char *function;
};
constexpr Marker kMarkers[] = {
    {16, "lttng_action_increment_map_value_create"},
    {15, "lttng_session_descriptor_set_trace_format"},
    {14, "lttng_get_kernel_tracer_status"},
};

}  // namespace

void *ctl_function(const char *name) {
  static void *handle = ctl_handle(nullptr);
  return handle != nullptr ? dlsym(handle, name) : nullptr;
}

std::string CtlLibrary::version() const {
  return "LTTng 2." + std::to_string(minor) + (minor <= 13 ? " or earlier" : "");
}

const CtlLibrary &ctl_library() {
  static const CtlLibrary library = [] {
    CtlLibrary found;
    ctl_handle(&found.path);
    for (const Marker &marker : kMarkers) {
      if (ctl_function(marker.function) != nullptr) {
        found.minor = marker.minor;
        break;
      }
    }
    return found;
  }();
  return library;
}

}  // namespace pinsight_control
