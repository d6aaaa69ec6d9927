"""Where a running process has a few of CPython's functions: the exported symbols of
the ELF object that defines them (the python executable or libpython), placed at the
address the object was loaded at (/proc/PID/maps). Read from the file, never from
the process: the file's inode must be the one mapped, or the answer would be wrong.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

PT_LOAD = 1
PF_X = 1
SHT_DYNSYM = 11
SYSCALL_INSTRUCTION = b"\x0f\x05"


class ElfError(Exception):
    """The object cannot be read as a 64-bit little-endian ELF file, or lacks a symbol."""


@dataclass(frozen=True)
class Mapping:
    start: int
    offset: int
    inode: int
    path: str


@dataclass(frozen=True)
class Segment:
    offset: int
    vaddr: int
    filesz: int
    flags: int


def mappings(pid: int) -> List[Mapping]:
    """The file-backed mappings of the process, in address order."""
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="surrogateescape") as f:
        lines = f.read().splitlines()
    result = []
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        start = int(fields[0].split("-")[0], 16)
        result.append(Mapping(start, int(fields[2], 16), int(fields[4]), fields[5]))
    return result


class ElfFile:
    """The parts of a 64-bit little-endian ELF file read here."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self.data = f.read()
        ident = self.data[:16]
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise ElfError(f"{path} is not a 64-bit little-endian ELF file")
        (self.phoff, self.shoff) = struct.unpack_from("<QQ", self.data, 0x20)
        (self.phentsize, self.phnum, self.shentsize, self.shnum) = struct.unpack_from(
            "<HHHH", self.data, 0x36
        )
        self.path = path

    def segments(self) -> List[Segment]:
        result = []
        for i in range(self.phnum):
            base = self.phoff + i * self.phentsize
            p_type, p_flags, p_offset, p_vaddr = struct.unpack_from("<IIQQ", self.data, base)
            p_filesz = struct.unpack_from("<Q", self.data, base + 32)[0]
            if p_type == PT_LOAD:
                result.append(Segment(p_offset, p_vaddr, p_filesz, p_flags))
        return result

    def dynamic_symbols(self, wanted: Sequence[str]) -> Dict[str, int]:
        """Values (link-time addresses) of the wanted names in .dynsym, where defined."""
        names = {name.encode(): name for name in wanted}
        found: Dict[str, int] = {}
        for i in range(self.shnum):
            base = self.shoff + i * self.shentsize
            sh_type = struct.unpack_from("<I", self.data, base + 4)[0]
            if sh_type != SHT_DYNSYM:
                continue
            sh_offset, sh_size, sh_link = struct.unpack_from("<QQI", self.data, base + 24)
            sh_entsize = struct.unpack_from("<Q", self.data, base + 56)[0] or 24
            strtab = self.shoff + sh_link * self.shentsize
            str_offset = struct.unpack_from("<Q", self.data, strtab + 24)[0]
            for entry in range(sh_offset, sh_offset + sh_size, sh_entsize):
                st_name, _info, _other, st_shndx, st_value = struct.unpack_from(
                    "<IBBHQ", self.data, entry
                )
                if st_shndx == 0 or st_value == 0:
                    continue  # undefined here
                end = self.data.index(b"\0", str_offset + st_name)
                name = names.get(self.data[str_offset + st_name : end])
                if name is not None:
                    found[name] = st_value
        return found

    def syscall_instruction(self) -> int:
        """The link-time address of a `syscall` instruction in an executable segment."""
        for segment in self.segments():
            if segment.flags & PF_X:
                at = self.data.find(
                    SYSCALL_INSTRUCTION, segment.offset, segment.offset + segment.filesz
                )
                if at >= 0:
                    return segment.vaddr + (at - segment.offset)
        raise ElfError(f"{self.path} has no system call instruction")


def _load_bias(elf: ElfFile, maps: Sequence[Mapping], path: str) -> int:
    first = min(elf.segments(), key=lambda s: s.vaddr)
    lowest = min((m for m in maps if m.path == path), key=lambda m: m.start)
    page = os.sysconf("SC_PAGESIZE")
    return lowest.start - lowest.offset - ((first.vaddr - first.offset) & ~(page - 1))


def resolve(pid: int, names: Sequence[str]) -> Tuple[Dict[str, int], int, str]:
    """The run-time addresses of `names` in process pid, all from the one object that
    defines them, and of a syscall instruction in that object; with the object's path."""
    maps = mappings(pid)
    seen: List[str] = []
    for mapping in maps:
        if mapping.path in seen:
            continue
        seen.append(mapping.path)
        if "python" not in os.path.basename(mapping.path):
            continue
        elf = _open_mapped(pid, mapping)
        if elf is None:
            continue
        values = elf.dynamic_symbols(names)
        if len(values) == len(names):
            bias = _load_bias(elf, maps, mapping.path)
            addresses = {name: bias + value for name, value in values.items()}
            return addresses, bias + elf.syscall_instruction(), mapping.path
    raise ElfError(f"no object mapped in process {pid} defines {', '.join(names)}")


def _open_mapped(pid: int, mapping: Mapping) -> Optional[ElfFile]:
    """The file as the process mapped it (through its root), if it is still that file."""
    path = f"/proc/{pid}/root{mapping.path}"
    try:
        if os.stat(path).st_ino != mapping.inode:
            raise ElfError(
                f"{mapping.path} was replaced after process {pid} loaded it: its symbols "
                "cannot be read from the file"
            )
        return ElfFile(path)
    except (OSError, struct.error, ValueError):
        return None
