"""The folder check of docs/architecture.md: every #include of src/ (and of the
provider's header in tracepoints/) points down the layers, and neither the
folders nor the files include each other in a circle; the same for the Python
package (python/pinsight_python): every import of one of ours points down
PY_DIRECT, and neither its subpackages nor its modules import each other in a
circle (an import inside a function counts).

    python scripts/check_layers.py [-v]

The build already makes a header of an unlinked folder unreachable (each
library exports only its own folder: CMakeLists.txt's
pinsight_layer_headers). This check says the same from the sources, with the
table below, which is the picture of docs/architecture.md: it catches an arrow
that a new link would let through, an include that escapes the include roots
("../"), and a circle. -v prints every folder-to-folder and subpackage-to-subpackage
arrow with its count.
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
    "activation": {"backends", "alloc", "gil"},
    "bindings": {"activation"},  # held to less below (EXACT)
    "reader": {"format", "common"},
    "inject": set(),
    "fdguard": set(),
    "control": set(),  # liblttng-ctl only: the session control of trace and attach
    "tracepoints": {"format"},
}
# Folders and files held to exactly these, not to what they reach: the bindings
# call activation (whose header includes common/errors.h), not the layers
# under it; the test module's probes read the configuration library itself, and
# its checks of the tracer's header-only containers (tracer/pointer_map.h) that.
EXACT: Dict[str, Set[str]] = {
    "bindings": {"activation", "config", "common"},
    "bindings/module.cpp": {"activation"},
    "bindings/testing_module.cpp": {"activation", "config", "common", "tracer"},
}

# The Python package's layers (docs/architecture.md, "The Python package"): each
# subpackage of python/pinsight_python may import its own modules, the modules
# every layer shares (ROOT_SHARED) and the subpackages its arrows reach. The
# root's modules are the entry points above them all (the API's face, __init__;
# cli; __main__; activate.py, which names its module in a string): no subpackage
# imports one, the root's __version__ alone excepted (ROOT_CONSTANTS).
PY_PACKAGE = ROOT / "python" / "pinsight_python"
PY_DIRECT: Dict[str, Set[str]] = {
    "activation": set(),  # the traced process's side: the standard library and the core
    "reading": set(),  # a trace read back: never how it was recorded
    "recording": {"activation", "reading"},  # the settings; the closing summary
    "commands": {"activation", "recording", "reading"},
    # The entry points: the API's face, the console script, python -m.
    "__init__": {"activation"},
    "cli": {"activation", "commands", "reading"},
    "__main__": {"activation"},
    "activate": {"activation"},
}
ENTRY_POINTS = {"__init__", "cli", "__main__", "activate"}
ROOT_SHARED = {"exit_status", "_pinsight_python", "_pinsight_reader", "_pinsight_python_testing"}
ROOT_CONSTANTS = {"__version__"}
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


def py_modules() -> Dict[str, Path]:
    """Every module of the package by its name under it ("reading.analysis";
    "__init__" for the root's, "activation" for a subpackage's __init__)."""
    modules: Dict[str, Path] = {}
    for path in sorted(PY_PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PY_PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def py_targets(path: Path) -> List[str]:
    """The package's names `path` imports, as paths from the package root
    ("reading.analysis"; "reading.analysis.read_trace" for a name from it; "" for
    the root itself), read with ast: every import, at any depth (late imports
    inside functions, the checker's under TYPE_CHECKING)."""
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


def py_module_of(name: str, modules: Dict[str, Path]) -> str:
    """The module an imported name lies in: itself, or the module it was taken from
    ("activation.settings.SettingsError" -> "activation.settings"; a compiled
    module's own name; "__init__" for one of the root's names)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules or candidate in ROOT_SHARED or candidate in ROOT_OWNED:
            return candidate
        parts.pop()
    return "__init__"


def py_layer(module: str) -> str:
    """A module's layer: its subpackage, or itself for a module of the root."""
    return module.split(".", 1)[0]


def judge_import(rel: Path, layer: str, name: str, target: str, errors: List[str]) -> str:
    """The layer a module of `layer` reaches by importing `name` (from the module
    `target`), "" within its own layer or a shared module; the error when the table
    refuses it."""
    target_layer = py_layer(target)
    owner = ROOT_OWNED.get(target_layer)
    if owner is not None and owner != layer:
        errors.append(f"{rel}: imports pinsight_python.{target}, which only "
                      f"{owner} may import (docs/architecture.md)")
    if target_layer in ROOT_SHARED or target_layer in ROOT_OWNED or target_layer == layer:
        return ""  # a shared module, its own layer (circles: checked apart)
    if target_layer in ENTRY_POINTS and layer not in ENTRY_POINTS:
        what = "the package's root, the API's face (import activation.api)" if (
            target == "__init__") else "an entry point"
        shown = ".".join(filter(None, ["pinsight_python", name]))
        errors.append(f"{rel}: imports {shown}: {what} (docs/architecture.md)")
    elif target_layer not in closure(layer, PY_DIRECT):
        errors.append(f"{rel}: imports pinsight_python.{name}: {layer} may "
                      f"not import {target_layer} (docs/architecture.md)")
    return target_layer


def check_python(errors: List[str]) -> Tuple[Counter[Tuple[str, str]], Counter[Tuple[str, str]]]:
    """Every import between the package's layers, counted, and every import between
    its modules; those the table refuses in `errors` (the same rule, closure and
    cycle check as src/)."""
    table_cycle = cycle(PY_DIRECT)
    if table_cycle:
        errors.append("the Python table of layers has a cycle: " + " -> ".join(table_cycle))
    modules = py_modules()
    for sub in sorted(p for p in PY_PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        if sub.name not in PY_DIRECT:
            errors.append(f"python/pinsight_python/{sub.name}: not in the table of layers "
                          "(scripts/check_layers.py, PY_DIRECT)")
    layer_arrows: Counter[Tuple[str, str]] = Counter()
    module_arrows: Counter[Tuple[str, str]] = Counter()
    for module, path in sorted(modules.items()):
        layer = py_layer(module)
        if layer not in PY_DIRECT and layer not in ROOT_SHARED:
            errors.append(f"{path.relative_to(ROOT)}: not in the table of layers "
                          "(scripts/check_layers.py, PY_DIRECT)")
            continue
        rel = path.relative_to(ROOT)
        for name in py_targets(path):
            target = py_module_of(name, modules)
            if target == "__init__" and name in ROOT_CONSTANTS:
                continue  # the version, a constant the build reads there
            if target != module:
                module_arrows[(module, target)] += 1
            target_layer = judge_import(rel, layer, name, target, errors)
            if target_layer:
                layer_arrows[(layer, target_layer)] += 1
    return layer_arrows, module_arrows


def check_acyclic(arrows: Iterable[Tuple[str, str]], what: str, errors: List[str]) -> int:
    """An error naming each circle the arrows make (one per strongly connected
    group); their count."""
    graph: Dict[str, Set[str]] = {}
    for a, b in arrows:
        graph.setdefault(a, set()).add(b)
    found = 0
    while True:
        circle = cycle(graph)
        if not circle:
            return found
        found += 1
        errors.append(f"{what}: " + " -> ".join(circle))
        for node in circle[:-1]:  # its members, out of the search for the next one
            graph.pop(node, None)
            for targets in graph.values():
                targets.discard(node)


def file_arrows(folders: Set[str]) -> Counter[Tuple[str, str]]:
    """Every file-to-file #include of src/ and tracepoints/ (as paths from the root)."""
    arrows: Counter[Tuple[str, str]] = Counter()
    for _folder, path in files():
        for included in INCLUDE.findall(path.read_text(encoding="utf-8")):
            target, error = target_of(path, included, folders)
            if error:
                continue  # reported by read_arrows
            if target and target != "tracepoints":
                found = SRC / included
            elif target == "tracepoints":
                found = ROOT / "tracepoints" / included
            else:
                found = path.parent / included
            arrows[(str(path.relative_to(ROOT)), str(found.relative_to(ROOT)))] += 1
    return arrows


def main(argv: List[str]) -> int:
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    errors = check_folders(folders)
    arrows = read_arrows(folders, errors)
    py_arrows, py_module_arrows = check_python(errors)
    back = len(errors)  # every refused arrow (and a table's own error)
    circles = check_acyclic(arrows, "folder circle", errors)
    circles += check_acyclic(file_arrows(folders), "file circle", errors)
    circles += check_acyclic(py_arrows, "Python subpackage circle", errors)
    circles += check_acyclic(py_module_arrows, "Python module circle", errors)
    if "-v" in argv:
        for (a, b), n in sorted(arrows.items()):
            print(f"{n:4} {a} -> {b}")
        for (a, b), n in sorted(py_arrows.items()):
            print(f"{n:4} pinsight_python.{a} -> pinsight_python.{b}")
    for e in errors:
        print(f"check_layers: {e}", file=sys.stderr)
    print(f"check_layers: src/ {len(arrows)} folder arrows, python/ {len(py_arrows)} layer "
          f"arrows and {len(py_module_arrows)} module arrows: {back} back-arrows, "
          f"{circles} circles")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
