"""Native callables named as the user writes them, with a module built with
pybind11 3.x (from PyPI) and a native function re-exported under its package's
name, as PyTorch does."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pybind11
import pytest

from tests.tracing import SETPROFILE, Tracer, check_balanced

HERE = Path(__file__).resolve().parents[1]  # tests/

# The package re-exports a static method of a native class and says, through
# the function's own __module__, that this is its name (torch/__init__.py does
# the same for torch._C._VariableFunctionsClass.relu -> torch.relu).
PBPKG_INIT = """
from pbmod import _FunctionsClass

relu = _FunctionsClass.relu
relu.__module__ = "pbpkg"
"""


@pytest.fixture(scope="module")
def pbmod_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert int(pybind11.__version__.split(".")[0]) >= 3, (
        f"pybind11 {pybind11.__version__}: these names need pybind11 3.x (pip install -e '.[test]')"
    )
    out = tmp_path_factory.mktemp("pbmod")
    target = out / f"pbmod{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(
        [
            "g++", "-O0", "-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden",
            f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}",
            str(HERE / "native" / "pbmod" / "pbmod.cpp"), "-o", str(target),
        ],
        check=True,
    )
    (out / "pbpkg").mkdir()
    (out / "pbpkg" / "__init__.py").write_text(PBPKG_INIT)
    return out


def test_pybind11_functions_methods_and_reexports(tracer: Tracer, pbmod_dir: Path) -> None:
    run = tracer.run(
        f"""
        import sys
        sys.path.insert(0, {str(pbmod_dir)!r})
        import pbmod
        import pbpkg

        def caller():
            k = pbmod.Klass()
            out = [
                pbmod.add(1, 2),
                pbmod.overloaded(4),
                pbmod.overloaded("ab"),
                k.method(5),
                pbmod.Klass.method(k, 6),
                pbmod.Klass.smethod(7),
                k.smethod(8),
                pbpkg.relu(-3),
                pbmod._FunctionsClass.relu(9),
            ]
            return out, pbmod.pybind11_version()

        print(caller())
        """
    )
    assert run.stdout.strip() == "([3, 8, 'abab', 5, 6, 107, 108, 0, 9], '3')"
    names = [
        e.fields["callee_name"]
        for e in run.trace.named("c_call_begin")
        if e.fields["caller_qualname"] == "caller"
    ]
    expected = [
        "pbmod.add",
        "pbmod.overloaded",
        "pbmod.overloaded",
        "pbmod.Klass.method",
        "pbmod.Klass.method",
        "pbmod.Klass.smethod",
        "pbmod.Klass.smethod",
        "pbpkg.relu",
        "pbpkg.relu",
        "pbmod.pybind11_version",
    ]
    if SETPROFILE:
        # The profile hook reports only builtin functions: not the call to the
        # class, nor `Klass.method(k, 6)`, whose callable is pybind11's
        # instancemethod wrapper.
        expected.remove("pbmod.Klass.method")
    else:
        expected.insert(0, "pbmod.Klass")
    assert names == expected
    assert not any("pybind11_" in n.split(".")[0] for n in names)
    check_balanced(run.trace)

