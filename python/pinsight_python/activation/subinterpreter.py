"""pinsight_python inside a sub-interpreter: the same API, untraced.

The compiled core is process-wide state bound to the main interpreter (its
configuration, control thread, tool id and shadow stacks). CPython 3.12+ refuses
to load it in an isolated sub-interpreter (``_interpreters.create()``), and on
3.8-3.11 loading it there deadlocks on the GIL. So a sub-interpreter never loads
it: ``import pinsight_python`` gets this module as its core, the ``.pth`` shim
does nothing, ``activate()`` raises ActivationError and ``status()`` says why.
The main interpreter traces as usual; the sub-interpreter's code is not traced.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing only for the checker: every traced process imports us
if TYPE_CHECKING:
    from typing import Any, Dict, List, NoReturn

REASON = "sub-interpreters are not traced (pinsight-python traces the main interpreter only)"


def in_subinterpreter() -> bool:
    """Whether this code runs in a sub-interpreter; imports no more than it must."""
    import _thread

    is_main = getattr(_thread, "_is_main_interpreter", None)  # 3.12+
    if is_main is not None:
        return not is_main()
    try:  # 3.8-3.11: sub-interpreters are made by this module (or the C API)
        import _xxsubinterpreters as interpreters  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    return bool(interpreters.get_current() != interpreters.get_main())


class ConfigError(ValueError):
    """A bad configuration (as the core's ConfigError)."""


class ActivationError(RuntimeError):
    """Tracing cannot start here (as the core's ActivationError)."""


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise ActivationError(REASON)


activate = set_mode = reload = _refuse


def deactivate() -> None:
    pass


def status() -> Dict[str, Any]:
    return {
        "active": False,
        "interpreter": "sub",
        "reason": REASON,
        "backend": "",
        "mode": "OFF",
        "events": [],
        "events_emitted": 0,
    }


def lexgions() -> List[Dict[str, Any]]:
    return []


def __getattr__(name: str) -> Any:
    raise AttributeError(f"pinsight_python core: {name} is not available: {REASON}")
