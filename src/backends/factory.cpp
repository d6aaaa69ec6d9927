#include "backends/factory.h"

#include "backends/monitoring.h"
#include "backends/profile_hook.h"
#include "common/compat.h"
#include "common/settings.h"

namespace pinsight {

std::unique_ptr<Backend> make_backend(const std::string &name) {
  BackendChoice choice;
  if (!named(name, kBackendNames, &choice)) {
    throw ActivationError("unknown backend '" + name + "' (expected " +
                          expected_names(kBackendNames) + ")");
  }
  switch (choice) {
    case BackendChoice::SysMonitoring:
      return make_monitoring_backend();
    case BackendChoice::Setprofile:
      return make_profile_backend();
    case BackendChoice::Auto:
      break;
  }
  return PINSIGHT_HAVE_SYS_MONITORING ? make_monitoring_backend() : make_profile_backend();
}

}  // namespace pinsight
