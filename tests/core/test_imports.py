"""Import events (events = import): one import_begin/import_end pair per module
actually loaded, nested as importlib nests them, balanced when an import raises,
on every thread; nothing for modules already in sys.modules or when not enabled.

Ground truth is the program's own sys.modules: the modules it gained.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from tests.tracing import Event, Tracer, check_balanced

IMPORTS = 'pinsight_python.activate(events=["import"])'


def import_tree(events: List[Event]) -> List[Tuple[int, str, str]]:
    """(depth, module, how it ended) per import, in begin order."""
    out: List[Tuple[int, str, str]] = []
    open_: List[int] = []
    for e in events:
        if e.short == "import_begin":
            open_.append(len(out))
            out.append((len(open_) - 1, e.fields["module"], "?"))
        elif e.short == "import_end":
            index = open_.pop()
            depth, module, _ = out[index]
            assert module == e.fields["module"]
            out[index] = (depth, module, e.fields["transition"])
    assert not open_
    return out


def parents(tree: List[Tuple[int, str, str]]) -> Dict[str, str]:
    """module -> the import it was loaded inside ("" at the top)."""
    out: Dict[str, str] = {}
    stack: List[str] = []
    for depth, module, _ in tree:
        del stack[depth:]
        out[module] = stack[-1] if stack else ""
        stack.append(module)
    return out


def test_imports_nest_as_importlib_loads_them(tracer: Tracer) -> None:
    run = tracer.run(
        """
        import sys, json
        before = set(sys.modules)
        import xml.dom.minidom
        import xml.dom.minidom, os, json          # loaded already: no event
        import importlib; importlib.import_module("xml.dom")
        print(json.dumps(sorted(set(sys.modules) - before)))
        """,
        activate=IMPORTS,
    )
    check_balanced(run.trace)
    loaded = json.loads(run.stdout.splitlines()[-1])
    assert "importlib" not in loaded  # already loaded by the interpreter
    events = [e for e in run.trace.events if e.short.startswith("import_")]
    tree = import_tree(events)
    tree = tree[[m for _, m, _ in tree].index("xml.dom.minidom"):]  # after `before`
    # One pair per module actually loaded, nothing else: not the imports of
    # modules already in sys.modules, not the imports of importlib. (copy's
    # optional `from org.python.core import ...` fails on CPython < 3.12.)
    assert sorted(module for _, module, how in tree if how == "return") == loaded
    assert all(module.startswith("org") for _, module, how in tree if how == "raise")
    up = parents(tree)
    assert up["xml.dom.minidom"] == ""
    assert up["xml.dom"] == "xml.dom.minidom"
    assert up["xml"] == "xml.dom"
    assert tree[0][1] == "xml.dom.minidom"
    assert {e.fields["python_thread_id"] for e in events} == {0}
    # events = import alone: no function events
    assert not run.trace.named("function_begin")


def test_failing_imports_are_balanced(tracer: Tracer) -> None:
    (tracer.tmp_path / "broken_mod.py").write_text("import colorsys\nraise RuntimeError('no')\n")
    (tracer.tmp_path / "outer_mod.py").write_text(
        "try:\n    import broken_mod\nexcept RuntimeError:\n    pass\nimport fractions\n"
    )
    run = tracer.run(
        """
        import sys
        sys.path.insert(0, ".")
        try:
            import no_such_module_here
        except ImportError:
            pass
        import outer_mod
        try:
            import broken_mod            # not cached after failing: loaded again
        except RuntimeError:
            pass
        print("done")
        """,
        activate=IMPORTS,
    )
    assert run.stdout.strip().endswith("done")
    check_balanced(run.trace)
    tree = import_tree([e for e in run.trace.events if e.short.startswith("import_")])
    outcome = [(depth, module, how) for depth, module, how in tree
               if module in {"no_such_module_here", "outer_mod", "broken_mod", "colorsys"}]
    assert outcome == [
        (0, "no_such_module_here", "raise"),
        (0, "outer_mod", "return"),
        (1, "broken_mod", "raise"),
        (2, "colorsys", "return"),
        (0, "broken_mod", "raise"),
    ]
    assert parents(tree)["fractions"] == "outer_mod"


def test_imports_on_threads(tracer: Tracer) -> None:
    for name in ("mod_a", "mod_b", "mod_c"):
        (tracer.tmp_path / f"{name}.py").write_text("import time\ntime.sleep(0.05)\n")
    (tracer.tmp_path / "mod_b.py").write_text("import mod_c\n")
    run = tracer.run(
        """
        import sys, threading
        sys.path.insert(0, ".")
        def load(name):
            __import__(name)
        threads = [threading.Thread(target=load, args=(n,)) for n in ("mod_a", "mod_b")]
        for t in threads: t.start()
        for t in threads: t.join()
        """,
        activate=IMPORTS,
    )
    check_balanced(run.trace)
    by_thread = {}
    for (_, vtid), events in run.trace.by_thread().items():
        tree = import_tree([e for e in events if e.short.startswith("import_")])
        ids = {e.fields["python_thread_id"] for e in events if e.short.startswith("import_")}
        for _, module, _ in tree:
            by_thread[module] = (vtid, ids, tree)
    vtid_a, ids_a, tree_a = by_thread["mod_a"]
    vtid_b, ids_b, tree_b = by_thread["mod_b"]
    assert vtid_a != vtid_b
    assert ids_a != ids_b and 0 not in ids_a | ids_b
    assert [(d, m) for d, m, _ in tree_a] == [(0, "mod_a")]
    assert [(d, m) for d, m, _ in tree_b] == [(0, "mod_b"), (1, "mod_c")]


def test_config_enables_imports_and_default_has_none(tracer: Tracer) -> None:
    config = tracer.tmp_path / "imports.txt"
    config.write_text("[Python]\n    events = function, import\n")
    run = tracer.run("import colorsys\ncolorsys.rgb_to_hsv(1, 0, 0)\n",
                     activate=f"pinsight_python.activate(config={str(config)!r})")
    check_balanced(run.trace)
    assert [e.fields["module"] for e in run.trace.named("import_begin")] == ["colorsys"]
    assert run.trace.functions()["rgb_to_hsv"] == 1
    config.write_text("[Python.default]\n    pysysmon_import = on\n    pysysmon_py_start = off\n")
    run = tracer.run("import colorsys\n",
                     activate=f"pinsight_python.activate(config={str(config)!r})")
    assert [e.fields["module"] for e in run.trace.named("import_begin")] == ["colorsys"]
    # Not enabled: not one import event.
    run = tracer.run("import colorsys\ncolorsys.rgb_to_hsv(1, 0, 0)\n")
    assert not run.trace.named("import_begin") and not run.trace.named("import_end")
    assert run.trace.functions()["rgb_to_hsv"] == 1


def test_report_flamegraph_and_chrome_show_imports(tracer: Tracer) -> None:
    (tracer.tmp_path / "slow_leaf.py").write_text("import time\ntime.sleep(0.2)\n")
    (tracer.tmp_path / "slow_pkg.py").write_text("import slow_leaf\nimport time\ntime.sleep(0.1)\n")
    run = tracer.run(
        "import sys\nsys.path.insert(0, '.')\nimport slow_pkg\n",
        activate='pinsight_python.activate(events=["function", "import"])',
    )
    check_balanced(run.trace)
    cli = [sys.executable, "-m", "pinsight_python.cli"]
    report = subprocess.run([*cli, "report", "--json", str(run.trace.path)],
                            capture_output=True, text=True, check=True)
    data = json.loads(report.stdout)
    proc = data["processes"][0]
    modules = {m["module"]: m for m in proc["imports"]["modules"]}
    assert modules["slow_pkg"]["cumulative_ns"] >= 0.3e9
    assert modules["slow_leaf"]["cumulative_ns"] >= 0.2e9
    # Minus the nested import, whatever it took: not a bound in time (a loaded machine
    # can stretch slow_pkg's own part, compiling and writing its .pyc, past 100 ms).
    assert 0.1e9 <= modules["slow_pkg"]["self_ns"] <= (
        modules["slow_pkg"]["cumulative_ns"] - modules["slow_leaf"]["cumulative_ns"])
    chain = proc["imports"]["slowest_chains"][0]
    assert chain["modules"] == ["slow_pkg", "slow_leaf"]
    assert all(f["kind"] != "import" for f in proc["functions"])
    text = subprocess.run([*cli, "report", str(run.trace.path)],
                          capture_output=True, text=True, check=True).stdout
    assert "slow_pkg > slow_leaf" in text
    folded = subprocess.run([*cli, "flamegraph", "--folded", str(run.trace.path)],
                            capture_output=True, text=True, check=True).stdout
    assert any("import slow_pkg;" in line and "import slow_leaf" in line
               for line in folded.splitlines())
    chrome = Path(run.trace.path) / "chrome.json"
    subprocess.run([*cli, "export", str(run.trace.path), "-o", str(chrome)],
                   capture_output=True, text=True, check=True)
    names = {e.get("name") for e in json.loads(chrome.read_text())["traceEvents"]}
    assert {"import slow_pkg", "import slow_leaf"} <= names
