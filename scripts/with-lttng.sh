#!/usr/bin/env bash
# Run a command against another LTTng (Debian sid's: scripts/sid-prefix.sh lttng), beside
# the machine's own:
#   bash scripts/with-lttng.sh [PREFIX] -- COMMAND [ARGS...]      (PREFIX: /opt/pinsight-lttng)
# A session daemon of PREFIX runs for the command alone, in a run directory of its own
# (LTTNG_RUNDIR, LTTng 2.14 and later), and the command's programs register with it
# alone (LTTNG_UST_APP_PATH): the machine's session daemon (Debian 12's LTTng 2.13) keeps
# running, untouched, for everyone else, and never sees the command's programs. The
# command runs with PREFIX/env.sh's variables: an interpreter whose glibc is sid's
# (/opt/pinsight-cpython/3.1x) loads PREFIX's LTTng-UST, liblttng-ctl and babeltrace2.
# When the command ends, however it ends, or the script is interrupted (SIGINT, SIGTERM),
# the daemon and its consumer daemons are stopped and the run directory removed. The exit
# status is the command's.
set -uo pipefail

prefix=/opt/pinsight-lttng
if [[ ${1:-} != -- && -n ${1:-} ]]; then prefix=$1; shift; fi
[[ ${1:-} == -- ]] || { echo "usage: with-lttng.sh [PREFIX] -- COMMAND [ARGS...]" >&2; exit 2; }
shift
(($#)) || { echo "usage: with-lttng.sh [PREFIX] -- COMMAND [ARGS...]" >&2; exit 2; }
die() { echo "with-lttng: error: $*" >&2; exit 1; }
[[ -f $prefix/env.sh ]] || die "$prefix/env.sh is missing: run bash scripts/sid-prefix.sh lttng"

# shellcheck source=/dev/null
source "$prefix/env.sh"
# Short: the daemon's Unix socket paths live under it (108 bytes at most).
rundir=$(mktemp -d /tmp/pinsight-lttng.XXXXXX) || die "cannot make a run directory"
export LTTNG_RUNDIR=$rundir LTTNG_UST_APP_PATH=$rundir

stop_daemon() {
  local pid deadline
  pid=$(cat "$rundir/lttng-sessiond.pid" 2>/dev/null) || pid=
  if [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null; then
    deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  fi
  # Its consumer daemons, should any outlive it: those whose command line names this
  # run directory, by pid.
  for pid in $(pgrep -f -- "--consumerd-cmd-sock $rundir/"); do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$rundir"
}
trap stop_daemon EXIT

lttng-sessiond --daemonize --no-kernel >"$rundir/sessiond.log" 2>&1 ||
  die "lttng-sessiond --daemonize failed: $(cat "$rundir/sessiond.log")"
deadline=$((SECONDS + 20))
until lttng list >/dev/null 2>&1; do
  ((SECONDS < deadline)) || die "the session daemon in $rundir did not answer within 20 s"
  sleep 0.05
done
# In the background, so that a signal to this script is answered at once (bash runs a
# trap only after a foreground command ends): passed on to the command, whose end is
# then waited for (its sessions go first), then the daemon stops.
"$@" &
command_pid=$!
trap 'kill -INT "$command_pid" 2>/dev/null; wait "$command_pid"; exit 130' INT
trap 'kill -TERM "$command_pid" 2>/dev/null; wait "$command_pid"; exit 143' TERM
wait "$command_pid"
