#include "backends/factory.h"

#include "backends/monitoring.h"
#include "backends/profile_hook.h"
#include "common/compat.h"

namespace pinsight {

std::unique_ptr<Backend> make_backend(const std::string &name) {
  if (name == "sys.monitoring") return make_monitoring_backend();
  if (name == "setprofile") return make_profile_backend();
  if (name == "auto") {
    return PINSIGHT_HAVE_SYS_MONITORING ? make_monitoring_backend() : make_profile_backend();
  }
  throw ActivationError("unknown backend '" + name +
                        "' (expected 'auto', 'sys.monitoring' or 'setprofile')");
}

}  // namespace pinsight
