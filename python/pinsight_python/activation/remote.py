"""The target side of ``pinsight-python attach`` and ``detach``.

``injection.py`` queues a few lines of code in the target (``sys.remote_exec`` on
3.14+, else a pending call, ``Py_AddPendingCall`` with ``PyRun_SimpleString``, queued by
our injector or gdb); the interpreter runs it on its main thread, between two
bytecodes, with the GIL held, and the code calls :func:`run` with the path of a
request file. Nothing here may raise into the program: every outcome, failure
included, goes to the result file next to the request.

The request is claimed by renaming it: if ``attach`` gave up waiting (the main thread
was stuck in a long C call), it renamed the request away first, and the late pending
call does nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any, Dict, Iterator, Optional

from .settings import SETTING, SETTINGS

CLAIMED_SUFFIX = ".claimed"
RESULT_SUFFIX = ".result"

# The page of the previous injection's code: released by the next one (the code of
# the current injection is still that of the running PyRun_SimpleString call). A page
# the injector's trampoline has not yet marked done is kept (never seen: the mark
# comes right after the call is queued, long before the next request).
_previous_page = 0


def _write_result(request_path: str, result: Dict[str, Any]) -> None:
    final = request_path + RESULT_SUFFIX
    temporary = final + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(json.dumps(result))  # the C encoder: no Python frames in the trace
    os.replace(temporary, final)


def _release_previous_page(page: int) -> None:
    global _previous_page
    previous, _previous_page = _previous_page, page
    if previous:
        from .. import _pinsight_python as core

        core._release_attach_page(previous)


@contextlib.contextmanager
def _ust_register_timeout(milliseconds: Optional[int]) -> Iterator[None]:
    """LTTng-UST, loaded by the first activation, waits LTTNG_UST_REGISTER_TIMEOUT
    (default 3 s) for the session daemon before events flow: a busy daemon would
    otherwise lose the first events, process_info among them. The program's own
    setting wins; ours is gone from its environment once LTTng-UST has read it."""
    name = "LTTNG_UST_REGISTER_TIMEOUT"
    if not milliseconds or name in os.environ:
        yield
        return
    os.environ[name] = str(int(milliseconds))
    try:
        yield
    finally:
        del os.environ[name]


@contextlib.contextmanager
def _flight_recorder(joined: Optional[Dict[str, Any]]) -> Iterator[None]:
    """attach --join: activation reads the run's flight_recorder setting (its stall
    watch) as the run's own processes do, from their variable; set only meanwhile."""
    name = SETTING["flight_recorder"].variable
    if not joined or name in os.environ:
        yield
        return
    os.environ[name] = f"{float(joined['stall']):g}"
    try:
        yield
    finally:
        del os.environ[name]


def _perform(request: Dict[str, Any]) -> Dict[str, Any]:
    from .. import _pinsight_python as core
    from . import api

    before = api.status()
    joined = request.get("join")
    if request["action"] == "activate":
        if before["active"]:
            return {"ok": True, "was_active": True, "status": before}
        with _ust_register_timeout(request.get("register_timeout_ms")), \
                _flight_recorder(joined):
            if joined:
                # attach --join: recorded by the flight-recorder run's session, as
                # its own processes are.
                api._join_run(joined["socket"])
            # The settings attach was given, each under its name, as activate() takes
            # them: what they leave open is the target's own (its variables, defaults).
            api.activate(**{
                s.name: request[s.name] for s in SETTINGS
                if s.api is not None and request.get(s.name)})
        if joined:
            api._start_recorder(joined["socket"])
    else:
        api.deactivate()
        # Detached means gone: the control thread (and a flight recorder's) stops and
        # SIGUSR1 goes back to the handler the program had (by default, it ends it).
        core._stop_recorder()
        core._stop_control_thread(True)
    return {"ok": True, "was_active": bool(before["active"]), "status": api.status()}


def run(request_path: str, page: int = 0) -> None:
    """Claim the request, perform it, write the result. Never raises."""
    interrupted: Optional[BaseException] = None
    try:
        try:
            os.rename(request_path, request_path + CLAIMED_SUFFIX)
        except OSError:
            return  # withdrawn by attach, or already done
        try:
            _release_previous_page(page)
            with open(request_path + CLAIMED_SUFFIX, encoding="utf-8") as f:
                request = json.load(f)
            result = _perform(request)
        except KeyboardInterrupt as e:  # the program's Ctrl-C: handed back below
            interrupted = e
            result = {"ok": False, "error": "interrupted (SIGINT) while activating"}
        except Exception as e:
            message = " ".join(str(e).split()) or type(e).__name__
            result = {"ok": False, "error": f"{type(e).__name__}: {message}"}
        result["pid"] = os.getpid()
        result["python"] = sys.version.split()[0]
        _write_result(request_path, result)
    except Exception:
        pass  # nowhere to report; the program must run on regardless
    finally:
        if interrupted is not None:
            # The SIGINT was meant for the program, not for us: deliver it again,
            # so that its handler (KeyboardInterrupt by default) runs where it would.
            import _thread

            _thread.interrupt_main()
