"""The settings' command-line options, made from their table (settings.SETTINGS): the
same for every command that starts tracing, ``pinsight-python trace``, ``python -m
pinsight_python`` and ``pinsight-python attach``. A row's ``option`` (an ``Option``, or
``Flags`` for one flag per value) is its option on the command line: :func:`add_arguments`
adds them to a parser, :func:`from_arguments` reads what was given, each value through its
row's parser, into ``Settings``.
"""

from __future__ import annotations

from .settings import FROZEN_IMPORTLIB, SETTING, SETTINGS, Flags, Setting, Settings, SettingsError

TYPE_CHECKING = False  # argparse is the commands' to import
if TYPE_CHECKING:
    import argparse
    from typing import Iterable, List, Optional, Sequence


def _rows(names: Optional[Iterable[str]]) -> List[Setting]:
    chosen = SETTINGS if names is None else [SETTING[name] for name in names]
    return [s for s in chosen if s.option is not None]


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_arguments(
    parser: argparse.ArgumentParser,
    names: Optional[Sequence[str]] = None,
    *,
    for_target: bool = False,
) -> None:
    """The options of the settings (every one that has an option, or those named), the
    same for every command that starts tracing. for_target: attach's, whose settings
    apply in another process: their help says the target's defaults, a setting's flags
    exclude each other in argparse, and they are listed among the command's own."""
    rows = _rows(names)
    container: argparse._ActionsContainer = (
        parser if for_target else parser.add_argument_group("what to trace"))
    for s in rows:
        option = s.option
        if isinstance(option, Flags):
            flags = container.add_mutually_exclusive_group() if for_target else container
            for flag, _, help in option.flags:
                flags.add_argument(flag, action="store_true", help=help)
        elif option is not None:
            container.add_argument(
                option.flag, metavar=option.metavar,
                action="append" if option.append else "store",
                help=(option.target_help or option.help) if for_target else option.help)
    if SETTING["exclude"] in rows:
        container.add_argument("--ignore-frozen", action="store_true",
                               help="leave out importlib's frozen bootstrap frames (<frozen "
                               "importlib._bootstrap>), which fill every import")


def from_arguments(
    args: argparse.Namespace, errors: List[str], names: Optional[Sequence[str]] = None
) -> Settings:
    """The settings add_arguments()' options give; each bad value is appended to
    `errors` (all of them, to report them at once) and left unset."""
    settings = Settings()
    for s in _rows(names):
        option = s.option
        if isinstance(option, Flags):
            given = [(flag, value) for flag, value, _ in option.flags
                     if getattr(args, _dest(flag), False)]
            if len(given) > 1:
                flags = " and ".join(flag for flag, _ in given)
                errors.append(f"{flags}: choose one {s.name}")
            elif given:
                setattr(settings, s.name, given[0][1])
            continue
        assert option is not None
        text = getattr(args, _dest(option.flag), None)
        if text is None:
            continue
        try:
            setattr(settings, s.name, s.parse(",".join(text) if option.append else text,
                                              option.flag))
        except SettingsError as e:
            errors.append(str(e))
    if getattr(args, "ignore_frozen", False):
        exclude = settings.exclude or []
        settings.exclude = exclude + [m for m in FROZEN_IMPORTLIB if m not in exclude]
    return settings
