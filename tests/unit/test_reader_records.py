"""The reader's records (src/reader/records.cpp) match their declarations in
python/pinsight_python/_pinsight_reader.pyi: the same types, the same fields in
the same order. Needs no trace."""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import Dict, List

import pytest

from pinsight_python import _pinsight_reader

STUB = Path(_pinsight_reader.__file__).with_name("_pinsight_reader.pyi")
if not STUB.exists():  # an installed copy without the sources beside it
    STUB = Path(__file__).parents[2] / "python" / "pinsight_python" / "_pinsight_reader.pyi"


def declared_records() -> Dict[str, List[str]]:
    """Record types of the stub and their properties, in order."""
    out: Dict[str, List[str]] = {}
    for node in ast.parse(STUB.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name)
                   and b.value.id == "structseq" for b in node.bases):
            continue
        out[node.name] = [item.name for item in node.body if isinstance(item, ast.FunctionDef)]
    return out


def runtime_fields(record_type: type) -> List[str]:
    return [name for name, value in vars(record_type).items()
            if isinstance(value, types.MemberDescriptorType)]


def test_every_record_type_is_declared_field_by_field() -> None:
    declared = declared_records()
    assert len(declared) >= 20
    made = {name for name, value in vars(_pinsight_reader).items()
            if isinstance(value, type) and issubclass(value, tuple)}
    assert made == set(declared)
    for name, fields in declared.items():
        record_type = getattr(_pinsight_reader, name)
        assert runtime_fields(record_type) == fields, name
        assert record_type.__module__ == "pinsight_python._pinsight_reader"
        assert record_type.n_fields == len(fields)  # type: ignore[attr-defined]


@pytest.mark.parametrize("method", ["count", "index"])
def test_no_field_hides_a_tuple_method(method: str) -> None:
    for name, fields in declared_records().items():
        assert method not in fields, name


def test_result_before_run_is_an_error(tmp_path: Path) -> None:
    reader = _pinsight_reader.Analysis([str(tmp_path)])
    with pytest.raises(_pinsight_reader.ReaderError, match="call run"):
        reader.result()
    progress = reader.progress()
    assert (progress.events, progress.end_ns) == (0, 0)
