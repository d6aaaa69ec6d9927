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

// Installs `handler` for `signo` in front of its current action, kept in
// `previous` for chain_signal. A signal the process ignores stays ignored (it
// ends nothing). SA_NODEFER: the default action re-raised inside the handler is
// delivered at once; SA_ONSTACK: a stack overflow's SIGSEGV runs on the
// alternate stack faulthandler sets up. False when nothing was installed.
inline bool chain_in(int signo, void (*handler)(int, siginfo_t *, void *),
                     struct sigaction *previous) {
  struct sigaction current = {};
  if (sigaction(signo, nullptr, &current) != 0) return false;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) return false;
  *previous = current;
  struct sigaction action = {};
  action.sa_sigaction = handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  return sigaction(signo, &action, nullptr) == 0;
}

}  // namespace pinsight
