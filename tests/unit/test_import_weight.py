"""What starting up imports, as a fixed cost (issue 36): a traced process imports
pinsight_python at its start, and ``pinsight-python trace`` runs before and after
every traced program. No timing here (bench/bench_startup.py measures): the modules
each start imports, which a change can only add to by breaking these tests.
Nothing here needs LTTng.
"""

from __future__ import annotations

import subprocess
import sys
from typing import List

import pytest

from tests.tracing import clean_env


def imported_after(code: str) -> List[str]:
    """The modules a fresh interpreter holds after running `code`, nothing traced."""
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=clean_env(), check=True, timeout=60)
    return proc.stdout.split()


# What the standard library charges an import (dataclasses pulls in inspect, ast and
# dis: about 10 ms) that the traced process's side does without.
HEAVY_FOR_EVERY_PROCESS = ("typing", "dataclasses", "inspect", "difflib", "socket", "pathlib",
                           "shutil", "subprocess", "threading", "argparse")


def test_a_traced_process_imports_only_what_activation_needs() -> None:
    # What the .pth shim imports when a run asks for tracing, without activating.
    modules = imported_after("import pinsight_python.activation.startup")
    assert "pinsight_python._pinsight_control" not in modules  # liblttng-ctl stays out
    heavy = [m for m in HEAVY_FOR_EVERY_PROCESS if m in modules]
    assert heavy == [], f"importing pinsight_python pulls in {heavy}"


@pytest.mark.parametrize("code, other_sides", [
    # The traced process's side, activated: never how a run records it, nor a reader.
    ("import pinsight_python; pinsight_python.status()",
     ("pinsight_python.recording", "pinsight_python.reading", "pinsight_python.commands",
      "pinsight_python._pinsight_control", "pinsight_python._pinsight_reader")),
    # A trace read back: never how it was recorded (the package's root, which Python
    # imports first, brings the API: activation, not recording).
    ("import pinsight_python.reading.report, pinsight_python.reading.summary",
     ("pinsight_python.recording", "pinsight_python.commands",
      "pinsight_python._pinsight_control")),
])  # fmt: skip
def test_each_side_loads_none_of_the_others(code: str, other_sides: List[str]) -> None:
    """Importing a module of one side runs none of the others' (docs/architecture.md):
    activation reaches neither recording nor reading, reading never recording."""
    modules = imported_after(code)
    assert [m for m in modules if m.startswith(other_sides)] == []


@pytest.mark.parametrize("command, not_imported", [
    ("trace", ("pinsight_python.reading.report", "pinsight_python.reading.analysis",
               "pinsight_python.recording.injection", "pinsight_python._pinsight_reader",
               "dataclasses", "difflib")),
    ("report", ("pinsight_python.recording.injection", "pinsight_python._pinsight_control",
                "pinsight_python.recording.run.supervisor")),
])  # fmt: skip
def test_a_subcommand_imports_only_its_own_side(command: str, not_imported: List[str]) -> None:
    modules = imported_after(f"from pinsight_python import cli\ncli.build_parser(only={command!r})")
    # What argparse itself imports for a parser with a subcommand is not ours to save
    # (3.14's argparse imports _colorize, and with it dataclasses).
    argparse_own = set(imported_after(
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_subparsers().add_parser('x').add_argument('--y')"))
    not_imported = [m for m in not_imported if m not in argparse_own]
    assert f"pinsight_python.commands.{command}" in modules
    others = {"trace", "report", "attach", "unbatch"} - {command}
    assert not [m for m in modules if m in {f"pinsight_python.commands.{o}" for o in others}]
    assert [m for m in not_imported if m in modules] == []


def test_the_whole_parser_still_knows_every_subcommand() -> None:
    from pinsight_python import cli

    parser = cli.build_parser()
    text = parser.format_help()
    for command in cli.SUBCOMMANDS:
        assert command.name in text
