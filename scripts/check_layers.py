"""The folder check of docs/architecture.md: every #include of src/ (and of the
provider's header in tracepoints/) points down the layers, and no folder cycle;
the same for the Python package's subpackages (python/pinsight_python): every
import of one of ours points down PY_DIRECT.

    python scripts/check_layers.py [-v]

The build already makes a header of an unlinked folder unreachable (each
library exports only its own folder: CMakeLists.txt's
pinsight_layer_headers). This check says the same from the sources, with the
table below, which is the picture of docs/architecture.md: it catches an arrow
that a new link would let through, an include that escapes the include roots
("../"), and a cycle. -v prints every folder-to-folder arrow with its count.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

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
    "control": set(),  # liblttng-ctl only: the session control of trace and attach
    "tracepoints": {"format"},
}
# Folders and files held to exactly these, not to what they reach: the bindings
# call the session (whose header includes common/errors.h), not the layers
# under it; the test module's probes read the configuration library itself, and
# its checks of the tracer's header-only containers (tracer/pointer_map.h) that.
EXACT: Dict[str, Set[str]] = {
    "bindings": {"session", "config", "common"},
    "bindings/module.cpp": {"session"},
    "bindings/testing_module.cpp": {"session", "config", "common", "tracer"},
}

# The Python package's layers (docs/architecture.md, "The Python package"): each
# subpackage of python/pinsight_python may import its own modules, the package's
# root (the API, __version__), the modules every layer shares (ROOT_SHARED) and
# the subpackages its arrows reach. The root's other modules (__main__, cli,
# activate) are the entry points above them all: no subpackage imports them.
PY_PACKAGE = ROOT / "python" / "pinsight_python"
PY_DIRECT: Dict[str, Set[str]] = {
    "activation": set(),  # the traced process's side: the standard library and the core
    "reading": set(),  # a trace read back: never how it was recorded
    "recording": {"activation", "reading"},  # the settings; the closing summary
    "commands": {"activation", "recording", "reading"},
}
ROOT_SHARED = {"exit_status", "_pinsight_python", "_pinsight_reader", "_pinsight_python_testing"}
# Compiled modules at the root that one subpackage owns: the session control
# (liblttng-ctl) is recording's; a traced process never loads it.
ROOT_OWNED = {"_pinsight_control": "recording"}
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


def py_targets(path: Path) -> List[str]:
    """The package's modules `path` imports, as paths from the package root
    ("reading.analysis"; "" for the root itself), read with ast: every import,
    at any depth (late imports inside functions count)."""
    package = ["pinsight_python", *path.parent.relative_to(PY_PACKAGE).parts]
    found: List[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *filter(None, [node.module])])
            # from x import y: y may be a module of x (from .. import reading).
            found.extend(f"{module}.{alias.name}" for alias in node.names)
    inside = []
    for name in found:
        if name == "pinsight_python" or name.startswith("pinsight_python."):
            inside.append(name[len("pinsight_python."):])
    return inside


def check_python(errors: List[str]) -> Counter[Tuple[str, str]]:
    """Every import between the package's subpackages, counted; those the
    table refuses in `errors` (the same rule, closure and cycle check as src/)."""
    table_cycle = cycle(PY_DIRECT)
    if table_cycle:
        errors.append("the Python table of layers has a cycle: " + " -> ".join(table_cycle))
    arrows: Counter[Tuple[str, str]] = Counter()
    for sub in sorted(p for p in PY_PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        if sub.name not in PY_DIRECT:
            errors.append(f"python/pinsight_python/{sub.name}: not in the table of layers "
                          "(scripts/check_layers.py, PY_DIRECT)")
            continue
        allowed = closure(sub.name, PY_DIRECT)
        for path in sorted(sub.rglob("*.py")):
            rel = path.relative_to(ROOT)
            for inside in py_targets(path):
                target = inside.split(".", 1)[0]
                owner = ROOT_OWNED.get(target)
                if owner is not None and owner != sub.name:
                    errors.append(f"{rel}: imports pinsight_python.{target}, which only "
                                  f"{owner} may import (docs/architecture.md)")
                if (PY_PACKAGE / f"{target}.py").is_file() and target not in ROOT_SHARED:
                    errors.append(f"{rel}: imports pinsight_python.{target}, an entry point "
                                  "(docs/architecture.md)")
                if target not in PY_DIRECT or target == sub.name:
                    continue  # the root's API, a shared module, its own subpackage
                arrows[(sub.name, target)] += 1
                if target not in allowed:
                    errors.append(f"{rel}: imports pinsight_python.{inside}: {sub.name} may "
                                  f"not import {target} (docs/architecture.md)")
    return arrows


def check_acyclic(arrows: Iterable[Tuple[str, str]], what: str, errors: List[str]) -> None:
    """An error naming the first cycle the arrows make, if any."""
    graph: Dict[str, Set[str]] = {}
    for a, b in arrows:
        graph.setdefault(a, set()).add(b)
    found = cycle(graph)
    if found:
        errors.append(f"{what}: " + " -> ".join(found))


def main(argv: List[str]) -> int:
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    errors = check_folders(folders)
    arrows = read_arrows(folders, errors)
    py_arrows = check_python(errors)
    check_acyclic(py_arrows, "Python subpackage cycle", errors)
    check_acyclic(arrows, "folder cycle", errors)
    if "-v" in argv:
        for (a, b), n in sorted(arrows.items()):
            print(f"{n:4} {a} -> {b}")
        for (a, b), n in sorted(py_arrows.items()):
            print(f"{n:4} pinsight_python.{a} -> pinsight_python.{b}")
    for e in errors:
        print(f"check_layers: {e}", file=sys.stderr)
    if not errors:
        print(f"check_layers: {len(arrows)} folder arrows and {len(py_arrows)} Python "
              "subpackage arrows, all down the layers, no cycle")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
