"""The start-up shim's entry point on CPython 3.15+ (pinsight_python.start, PEP 829).

There a .pth file's import lines run before every .start file's entry points, an
editable install's import finder among them (scikit-build-core installs it that
way): pinsight_python.pth's line would import the package before it can be found
whole. A matching pinsight_python.start makes 3.15 skip that line and call
:func:`run` instead, after the entry points of the .start files named before it.
Earlier versions ignore .start files and run the line. The line stays the one
statement of when to activate: this runs it.
"""

import os


def run() -> None:
    pth = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pinsight_python.pth")
    with open(pth, encoding="utf-8") as f:
        exec(compile(f.read(), pth, "exec"), {})
