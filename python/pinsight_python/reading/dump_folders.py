"""A flight recorder's output folder: its dumps, ``OUTPUT/dump-N-REASON/``, each a
trace with ``dump.json`` beside LTTng's files. ``trace`` writes them
(recording/run/flight.py) and imports this module at its start: it imports no
reader module. :func:`dump_folders` lets every view read an output folder
holding one dump as that dump (reading/analysis.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

__all__ = ["DUMP_FILE", "DUMP_PREFIX", "dump_folders"]

DUMP_PREFIX = "dump-"
DUMP_FILE = "dump.json"


def dump_folders(root: Path) -> List[Path]:
    """The dumps in a flight recorder's output folder (none when `root` is a dump,
    or no flight recorder's), in the order they were taken."""
    if (root / DUMP_FILE).is_file() or not root.is_dir():
        return []
    found = [d for d in root.iterdir()
             if d.is_dir() and d.name.startswith(DUMP_PREFIX) and (d / DUMP_FILE).is_file()]

    def number(folder: Path) -> Tuple[int, str]:
        head = folder.name[len(DUMP_PREFIX):].split("-", 1)[0]
        return (int(head) if head.isdigit() else 0, folder.name)

    return sorted(found, key=number)
