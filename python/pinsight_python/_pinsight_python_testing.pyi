# Test hooks, built only with -DPINSIGHT_PYTHON_TESTING=ON (editable installs);
# wheels do not carry this module.
from typing import Any, Dict, List, Tuple

def _debug_stack() -> List[Tuple[int, str, str, int]]: ...
def _debug_current_frame() -> int: ...
def _debug_generator_entries() -> int: ...
def _parse_config(path: str) -> Dict[str, Any]: ...
def _parse_config_string(text: str, name: str = "<string>") -> Dict[str, Any]: ...
def _lexgion_simulate(
    config: Any,
    qualname: str,
    filename: str = "",
    module: str = "",
    thread_id: int = 0,
    n_calls: int = 100,
    *,
    monitoring_calls: int = 0,
) -> List[int]: ...
def _lexgion_simulate_detail(
    config: Any,
    qualname: str,
    filename: str = "",
    module: str = "",
    thread_id: int = 0,
    n_calls: int = 100,
    *,
    monitoring_calls: int = 0,
) -> Dict[str, Any]: ...
def _unverified_cpython(hexversion: int, free_threaded: bool) -> str: ...
def _gil_events_refusal(free_threaded: bool) -> str: ...
