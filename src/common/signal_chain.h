// A fatal signal's handler of ours, once its own work is done, hands the signal
// to the action it replaced: that handler (SA_SIGINFO or not), nothing for
// SIG_IGN, else the default action, as if ours had never been installed.
// Async-signal-safe: sigaction and raise only.
#pragma once

#include <signal.h>

namespace pinsight {

inline void chain_signal(int signo, const struct sigaction &previous, siginfo_t *info,
                         void *context) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(signo, info, context);
    return;
  }
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != nullptr) {
    previous.sa_handler(signo);
    return;
  }
  sigaction(signo, &previous, nullptr);
  raise(signo);
}

}  // namespace pinsight
