"""Type stubs of the compiled trace reader (src/reader)."""

from typing import Any, Dict, List, Tuple

class ReaderError(RuntimeError): ...

class Analysis:
    def __init__(
        self,
        trace_dirs: List[str],
        call_trees: bool = True,
        chrome_path: str = "",
        decode_threads: int = 0,
        pids: List[int] = ...,
        ranks: List[int] = ...,
        threads: List[int] = ...,
        modules: List[str] = ...,
        excludes: List[str] = ...,
        ignore_frozen: bool = False,
    ) -> None: ...
    def run(self) -> bool: ...
    def cancel(self) -> None: ...
    def progress(self) -> Tuple[int, int, int, int]: ...
    def result(self) -> Dict[str, Any]: ...
