"""The folder check of docs/architecture.md: every #include of src/ (and of the
provider's header in tracepoints/) points down the layers, and no folder cycle.

    python scripts/check_layers.py [-v]

The build already makes a header of an unlinked folder unreachable (each
library exports only its own folder: CMakeLists.txt's
pinsight_layer_headers). This check says the same from the sources, with the
table below, which is the picture of docs/architecture.md: it catches an arrow
that a new link would let through, an include that escapes the include roots
("../"), and a cycle. -v prints every folder-to-folder arrow with its count.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# The arrows of docs/architecture.md's picture: a folder may include its own
# headers and those of the folders these reach (their closure). "tracepoints"
# is the provider's header, which only the emitter includes.
DIRECT: Dict[str, Set[str]] = {
    "common": set(),  # CPython only
    "format": set(),  # nothing of ours
    "config": {"common"},
    "emit": {"format", "common", "tracepoints"},
    "tracer": {"emit", "config"},
    "backends": {"tracer"},
    "alloc": {"tracer"},
    "gil": {"tracer"},
    "session": {"backends", "alloc", "gil"},
    "bindings": {"session"},  # held to less below (EXACT)
    "reader": {"format", "common"},
    "inject": set(),
    "fdguard": set(),
    "tracepoints": {"format"},
}
# Folders and files held to exactly these, not to what they reach: the bindings
# call the session (whose header includes common/errors.h), not the layers
# under it; the test module's probes read the configuration library itself.
EXACT: Dict[str, Set[str]] = {
    "bindings": {"session", "config", "common"},
    "bindings/module.cpp": {"session"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCES = ("*.c", "*.cpp", "*.h")


def closure(folder: str, table: Dict[str, Set[str]]) -> Set[str]:
    seen: Set[str] = set()
    todo = list(table[folder])
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(table.get(f, set()))
    return seen


def cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One cycle of `graph` (folders, first repeated last), or []."""
    state: Dict[str, int] = {}  # 1: on the path, 2: done
    path: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, set())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def files() -> List[Tuple[str, Path]]:
    out = []
    for folder in sorted(p for p in SRC.iterdir() if p.is_dir()):
        for pattern in SOURCES:
            out.extend((folder.name, f) for f in sorted(folder.glob(pattern)))
    tracepoints = ROOT / "tracepoints"
    for pattern in SOURCES:
        out.extend(("tracepoints", f) for f in sorted(tracepoints.glob(pattern)))
    return out


def check_folders(folders: Set[str]) -> List[str]:
    errors = []
    table_cycle = cycle(DIRECT)
    if table_cycle:
        errors.append("the table of layers has a cycle: " + " -> ".join(table_cycle))
    for folder in sorted(folders):
        if folder not in DIRECT:
            errors.append(f"src/{folder}: not in the table of layers (scripts/check_layers.py)")
        if not (SRC / folder / "CMakeLists.txt").is_file():
            errors.append(f"src/{folder}: no CMakeLists.txt declaring its library")
    return errors


def target_of(path: Path, included: str, folders: Set[str]) -> Tuple[str, str]:
    """The folder `included` lies in (its own folder: ""), or an error."""
    if ".." in Path(included).parts:
        return "", "climbs out of the include roots"
    if "/" in included:
        target = included.split("/", 1)[0]
        return (target, "") if target in folders else ("", f"no folder src/{target}")
    # A header of the same folder, or the provider's (tracepoints/).
    if (path.parent / included).is_file():
        return "", ""
    if (ROOT / "tracepoints" / included).is_file():
        return "tracepoints", ""
    return "", f"not in {path.parent.name}/"


def read_arrows(folders: Set[str], errors: List[str]) -> Counter[Tuple[str, str]]:
    """Every folder-to-folder #include, counted; the ones the table refuses in `errors`."""
    arrows: Counter[Tuple[str, str]] = Counter()
    for folder, path in files():
        rel = path.relative_to(ROOT)
        allowed = EXACT.get(f"{folder}/{path.name}", EXACT.get(folder, closure(folder, DIRECT)))
        for included in INCLUDE.findall(path.read_text(encoding="utf-8")):
            target, error = target_of(path, included, folders)
            if error:
                errors.append(f'{rel}: #include "{included}": {error}')
            if not target or target == folder:
                continue
            arrows[(folder, target)] += 1
            if target not in allowed:
                errors.append(f'{rel}: #include "{included}": {folder} may not include '
                              f"{target} (docs/architecture.md)")
    return arrows


def main(argv: List[str]) -> int:
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    errors = check_folders(folders)
    arrows = read_arrows(folders, errors)
    graph: Dict[str, Set[str]] = {}
    for a, b in arrows:
        graph.setdefault(a, set()).add(b)
    found = cycle(graph)
    if found:
        errors.append("folder cycle: " + " -> ".join(found))
    if "-v" in argv:
        for (a, b), n in sorted(arrows.items()):
            print(f"{n:4} {a} -> {b}")
    for e in errors:
        print(f"check_layers: {e}", file=sys.stderr)
    if not errors:
        print(f"check_layers: {len(arrows)} folder arrows, all down the layers, no cycle")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
