"""Files the build installs beside the compiled core: the malloc interposer, the
descriptor guard, attach's injector. Found through the core's own location (an
editable install keeps it in site-packages, apart from the Python sources)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def beside_extension(name: str) -> Path:
    spec = importlib.util.find_spec("pinsight_python._pinsight_python")
    package = Path(__file__).parent.parent  # the extension's folder: the package's root
    folder = Path(spec.origin).resolve().parent if spec and spec.origin else package
    return folder / name
