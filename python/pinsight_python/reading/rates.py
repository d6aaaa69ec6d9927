"""The report's rate-control section: how many calls of each rate-controlled
function were traced of those seen (lexgion_counts), capped or sampled, in how many
TRACING windows; the configuration in force and the mode changes. The JSON
(:func:`rate_json`) and its text (:func:`rate_text`, :func:`rate_lines`), which the
closing summary (summary.py) shows too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List

from .analysis import format_ns
from .tables import function_text, table

if TYPE_CHECKING:
    from .._pinsight_reader import LexgionCounts, ModeChange


def tracing_windows(mode_changes: Iterable[ModeChange]) -> int:
    """The TRACING windows in which caps counted from zero: one, and one more per
    INTROSPECT pause that resumed in TRACING (PInsight's cyclic windows; a reload
    keeps the counts)."""
    return 1 + sum(1 for m in mode_changes if m.reason == "introspect" and m.mode == "TRACING")


def rate_json(counts: LexgionCounts, windows: int = 1) -> Dict[str, Any]:
    """Rate control's counts of one function (lexgion_counts), as the report's "rate";
    `windows`: tracing_windows() of its process."""
    # Counters are per thread: traced calls summed over threads can reach the
    # cap before one thread did; a reached cap is what a user looks for.
    capped = counts.max_num_traces >= 0 and counts.traced >= counts.max_num_traces
    sampled = counts.tracing_rate > 1 or counts.trace_starts_at > 0
    return {
        "traced": counts.traced,
        "seen": counts.seen,
        "seen_is_lower_bound": counts.seen_is_lower_bound,
        "untraced": None if counts.seen_is_lower_bound else counts.seen - counts.traced,
        "capped": capped,
        "sampled": sampled,
        "max_num_traces": None if counts.max_num_traces == -1 else counts.max_num_traces,
        "tracing_rate": counts.tracing_rate,
        "trace_starts_at": counts.trace_starts_at,
        "section": counts.section,
        "windows": windows,
    }


def _per_windows(rate: Dict[str, Any]) -> str:
    # A cap counts from zero in each window: the traced calls add up past it.
    return f" in each window ({rate['windows']:,} windows)" if rate["windows"] > 1 else ""


def rate_text(rate: Dict[str, Any]) -> str:
    """"capped 10/>=10", "sampled 10/100", "traced 5/5": traced of seen calls."""
    seen = f"{'>=' if rate['seen_is_lower_bound'] else ''}{rate['seen']:,}"
    kind = "capped" if rate["capped"] else "sampled" if rate["sampled"] else "traced"
    windows = (f" ({rate['max_num_traces']:,} per window, {rate['windows']:,} windows)"
               if rate["capped"] and rate["windows"] > 1 else "")
    return f"{kind} {rate['traced']:,}/{seen}{windows}"


def rate_lines(proc: Dict[str, Any]) -> List[str]:
    """The configuration in force, rate control's counts, the mode changes."""
    lines: List[str] = []
    for config in proc.get("configs", []):
        path = config["path"] or "built-in defaults (no configuration file)"
        lines.append(f"Configuration: {path} (generation {config['generation']}, "
                     f"at +{format_ns(config['offset_ns'])})")
    rated = proc.get("rate_controlled", [])
    if rated:
        lines.append("Rate control (calls traced of calls seen; the self time of their callers "
                     "includes the untraced calls):")
        for row in rated:
            rate = row["rate"]
            if rate["seen_is_lower_bound"]:
                seen = f"of at least {rate['seen']:,} calls; later calls not counted"
            else:
                seen = f"of {rate['seen']:,} calls"
            settings = [f"max_num_traces = {rate['max_num_traces']}"
                        if rate["max_num_traces"] is not None else ""]
            if rate["tracing_rate"] > 1:
                settings.append(f"tracing_rate = {rate['tracing_rate']}")
            if rate["trace_starts_at"] > 0:
                settings.append(f"trace_starts_at = {rate['trace_starts_at']}")
            where = ", ".join(s for s in [f"[{rate['section']}]" if rate["section"] else "",
                                          *settings] if s)
            kind = ("capped" + _per_windows(rate) if rate["capped"]
                    else "sampled" if rate["sampled"] else "all traced")
            lines.append(f"  {function_text(row)}: {kind}, traced {rate['traced']:,} {seen} "
                         f"({where})")
    changes = proc.get("mode_changes", [])
    if changes:
        lines.append("Mode changes:")
        cells = [[f"+{format_ns(m['offset_ns'])}", m["mode"], m["reason"], str(m["generation"])]
                 for m in changes]
        lines += table(["at", "mode", "reason", "config generation"], cells,
                        [True, False, False, True])
        if any(m["mode"] != "TRACING" for m in changes):
            lines.append("Functions are traced only while the mode is TRACING: calls made "
                         "under another mode are not in this report.")
    return lines
