"""``pinsight-python flamegraph``: folded stacks and a self-contained SVG.

Frames are weighted by time (nanoseconds), not by samples: the trace has
every call. Stacks start with the process and thread labels, then Python
frames (``qualname (file:line)``); native calls are frames named by their
callee, leaves unless they call back into Python.
"""

from __future__ import annotations

import colorsys
import hashlib
import html
import json
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Callable,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Protocol,
    TextIO,
    Tuple,
)

from .analysis import ORIGINS, Symbol, TraceData, format_ns
from .damage import damaged_files
from .resources import format_bytes

if TYPE_CHECKING:
    from .._pinsight_reader import ThreadRecord, TraceResult

__all__ = ["alloc_weighted", "folded_stacks", "render_svg", "write_folded"]


class _TreeNode(Protocol):
    """A call path: the reader's CallTreeNode, or one weighted by bytes."""

    @property
    def parent(self) -> int: ...
    @property
    def symbol(self) -> int: ...
    @property
    def self_ns(self) -> int: ...
    @property
    def calls(self) -> int: ...


class _AllocNode(NamedTuple):
    """A call path weighted by sampled allocated bytes (self_ns holds bytes)."""

    parent: int
    symbol: int
    self_ns: int
    calls: int


class _AllocWeighted(TraceData):
    """The trace whose call paths the flame graph weights by allocated bytes."""


class _ByTask(TraceData):
    """The trace whose call paths the flame graph shows by asyncio task."""


def by_task(trace: TraceData) -> TraceData:
    """The same trace drawn by asyncio task (``flamegraph --by-task``): each task
    step's frames under their task (tasks of one name together, its number left
    out) instead of under the event loop's frames; the rest as before."""
    return _ByTask(trace.path, trace.trace_dirs, trace.raw, trace.wall_seconds, trace.filters)


def alloc_weighted(trace: TraceData) -> TraceData:
    """The same call paths weighted by sampled allocated bytes instead of time
    (``flamegraph --alloc``): a path's self weight is what its own samples stand for."""
    for proc in trace.processes:
        for thread in proc.threads:
            if thread.call_tree is None:
                raise ValueError("the trace was read without call trees")
    # The reader's records stay as they are: the weights are taken as the trees are walked.
    return _AllocWeighted(trace.path, trace.trace_dirs, trace.raw, trace.wall_seconds,
                          trace.filters)


def _call_tree(trace: TraceData, thread: ThreadRecord) -> List[_TreeNode]:
    tree = thread.call_tree
    if isinstance(trace, _ByTask) and thread.task_tree is not None:
        tree = thread.task_tree
    if tree is None:
        raise ValueError("the trace was read without call trees")
    if not isinstance(trace, _AllocWeighted):
        return list(tree)
    weights = {a.node: a.bytes for a in thread.alloc_tree}
    return [_AllocNode(n.parent, n.symbol, weights.get(i, 0), 0) for i, n in enumerate(tree)]


def _clean(name: str) -> str:
    # ';' separates frames and a newline ends a line in the folded format.
    return name.replace(";", ":").replace("\n", " ")


def _thread_trees(trace: TraceData) -> Iterator[Tuple[str, str, List[_TreeNode]]]:
    for proc in trace.processes:
        for thread in proc.threads:
            tree = _call_tree(trace, thread)
            if len(tree) > 1:
                yield proc.label, thread.label, tree


def folded_stacks(trace: TraceData) -> Iterator[Tuple[str, int]]:
    """(``proc;thread;f;g;h``, self nanoseconds) for every call path with time."""
    names = [_clean(s.frame_name) for s in trace.symbols]
    for proc_label, thread_label, tree in _thread_trees(trace):
        paths: List[str] = [f"{_clean(proc_label)};{_clean(thread_label)}"]
        for n in tree[1:]:
            path = f"{paths[n.parent]};{names[n.symbol]}"
            paths.append(path)
            if n.self_ns > 0:
                yield path, n.self_ns


def write_folded(trace: TraceData, out: TextIO) -> int:
    """Writes the collapsed-stack text; returns the number of lines."""
    lines = 0
    for path, weight in folded_stacks(trace):
        out.write(f"{path} {weight}\n")
        lines += 1
    return lines


# ----------------------------------------------------------------------------
# SVG


@dataclass
class _Node:
    name: str
    kind: str  # "python", "native" or "group" (process, thread, root)
    detail: str = ""
    # What the box shows, longest first: the function's name comes first, its
    # path only where there is room.
    labels: Tuple[str, ...] = ()
    order: int = 0  # siblings: the program's own code left of libraries
    self_ns: int = 0
    total_ns: int = 0
    calls: int = 0
    symbol: int = -1  # the function of a python or native frame
    children: Dict[str, _Node] = field(default_factory=dict)

    def child(self, name: str, kind: str, detail: str = "", labels: Tuple[str, ...] = (),
              order: int = 0) -> _Node:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = _Node(name, kind, detail, labels or (name,), order)
        return node


def _labels(s: Symbol) -> Tuple[str, ...]:
    if s.native:
        return (s.qualname,)
    return (s.frame_name, f"{s.qualname} ({s.short_location})", s.qualname)


def _build_tree(trace: TraceData) -> _Node:
    root = _Node("all", "group", labels=("all",))
    symbols = trace.symbols
    rank = {origin: i for i, origin in enumerate(ORIGINS)}
    labels = [_labels(s) for s in symbols]
    for proc_label, thread_label, tree in _thread_trees(trace):
        thread_node = root.child(proc_label, "group").child(thread_label, "group")
        nodes: List[_Node] = [thread_node]
        for n in tree[1:]:
            s = symbols[n.symbol]
            detail = "native call" if s.native else s.location
            node = nodes[n.parent].child(s.frame_name, "native" if s.native else "python",
                                         detail, labels[n.symbol], rank.get(s.origin, len(ORIGINS)))
            node.self_ns += n.self_ns
            node.calls += n.calls
            node.symbol = n.symbol
            nodes.append(node)
    _sum_totals(root)
    return root


def _lifetimes(trace: TraceData) -> Dict[int, Tuple[int, int]]:
    """Finished generator instances per function and their wall time (first
    start to final end): the boxes show only the time their segments ran."""
    out: Dict[int, Tuple[int, int]] = {}
    for proc in trace.processes:
        for thread in proc.threads:
            for f in thread.functions:
                if f.finished:
                    had = out.get(f.symbol, (0, 0))
                    out[f.symbol] = (had[0] + f.finished, had[1] + f.wall_ns)
    return out


def _sum_totals(root: _Node) -> None:
    # Iterative post-order: call paths can be deeper than Python's recursion limit.
    order: List[_Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children.values())
    for node in reversed(order):
        node.total_ns = node.self_ns + sum(c.total_ns for c in node.children.values())
        if node.kind == "group":
            node.calls = sum(c.calls for c in node.children.values())


def _color(node: _Node) -> str:
    digest = hashlib.md5(node.name.encode("utf-8", "replace")).digest()
    v1, v2 = digest[0] / 255, digest[1] / 255
    if node.kind == "group":
        r, g, b = colorsys.hls_to_rgb(0.75, 0.75 + 0.1 * v1, 0.25)
    elif node.kind == "native":
        r, g, b = colorsys.hls_to_rgb(0.5 + 0.12 * v1, 0.55 + 0.1 * v2, 0.55)
    else:
        r, g, b = colorsys.hls_to_rgb(0.02 + 0.12 * v1, 0.55 + 0.1 * v2, 0.85)
    return f"rgb({int(r * 255)},{int(g * 255)},{int(b * 255)})"


_SCRIPT = """
<script><![CDATA[
// Click a frame to zoom into it; click "Reset zoom" (or the root) to go back.
(function () {
  var svg = document.documentElement, W = %(width)d, PAD = %(pad)d, CW = %(char_width)s;
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  function fit(g, x, w) {
    var r = g.querySelector("rect"), t = g.querySelector("text");
    var labels = JSON.parse(g.getAttribute("data-l"));
    r.setAttribute("x", x); r.setAttribute("width", Math.max(w, 0));
    t.setAttribute("x", x + 3);
    t.textContent = label(labels, Math.floor((w - 6) / CW));
  }
  // The longest label that fits: name and path, name and short path, name.
  function label(labels, n) {
    if (n < 3) return "";
    for (var i = 0; i < labels.length; i++) if (labels[i].length <= n) return labels[i];
    var name = labels[labels.length - 1];
    return name.slice(0, n - 2) + "..";
  }
  function zoom(target) {
    var x0 = +target.getAttribute("data-x"), w0 = +target.getAttribute("data-w");
    var d0 = +target.getAttribute("data-d"), scale = (W - 2 * PAD) / w0;
    frames.forEach(function (g) {
      var x = +g.getAttribute("data-x"), w = +g.getAttribute("data-w");
      var d = +g.getAttribute("data-d");
      var inside = x >= x0 - 1e-6 && x + w <= x0 + w0 + 1e-6;
      var below = d < d0 && x <= x0 + 1e-6 && x + w >= x0 + w0 - 1e-6;
      g.style.display = inside || below ? "" : "none";
      if (inside) fit(g, PAD + (x - x0) * scale, w * scale);
      else if (below) fit(g, PAD, W - 2 * PAD);
    });
    document.getElementById("reset").style.display = "";
  }
  frames.forEach(function (g) { g.addEventListener("click", function () { zoom(g); }); });
  document.getElementById("reset").addEventListener("click", function () {
    zoom(frames[0]);
    this.style.display = "none";
  });
})();
]]></script>
"""


def _fit_label(labels: Tuple[str, ...], chars: int) -> str:
    """The longest label that fits in ``chars`` characters (the JS twin: label())."""
    if chars < 3:
        return ""
    for text in labels:
        if len(text) <= chars:
            return text
    return labels[-1][: chars - 2] + ".."


def _tooltip(node: _Node, share: float, fmt: Callable[[int], str],
             lifetime: Optional[Tuple[int, int]]) -> str:
    lines = [node.name]
    if node.detail and node.detail not in node.name:
        lines.append(node.detail)
    lines.append(f"total {fmt(node.total_ns)} ({share:.2f}%), "
                 f"self {fmt(node.self_ns)}, calls {node.calls:,}")
    if lifetime:
        finished, wall_ns = lifetime
        lines.append(f"generator: {finished:,} instances finished, wall (first start to "
                     f"final end) {format_ns(wall_ns)}, mean {format_ns(wall_ns // finished)}")
    return "\n".join(lines)


def _svg_warnings(raw: TraceResult) -> List[str]:
    warnings = []
    if raw.discarded_events:
        warnings.append(f"LTTng discarded {raw.discarded_events:,} events: "
                        "timings near them are unreliable")
    damaged = [f for f in damaged_files(raw.damaged) if not f.nothing_lost]
    if damaged:
        # The stderr warnings name the files; the SVG says what it means.
        warnings.append(f"trace damaged ({len(damaged)} file{'s' if len(damaged) != 1 else ''}): "
                        "widths are lower bounds")
    missing = raw.missing_events
    if missing:
        # Batched traces: the stderr warning says where; the SVG says that.
        warnings.append(f"events missing on {len({(m.vpid, m.vtid) for m in missing})} "
                        "thread(s) (lost or unflushed blocks)")
    return warnings


def render_svg(
    trace: TraceData,
    title: Optional[str] = None,
    width: int = 1200,
    min_width: float = 0.1,
    alloc: bool = False,
) -> str:
    """A flame graph: one box per call path, width proportional to its time.

    Boxes narrower than ``min_width`` pixels are left out (their time still
    counts in their parents), which bounds the size of the file.
    """
    if alloc:
        trace = alloc_weighted(trace)
    fmt = format_bytes if alloc else format_ns
    root = _build_tree(trace)
    lifetimes = _lifetimes(trace)
    frame_h, pad, top_margin, bottom_margin = 16, 10, 40, 30
    char_width = 7.0
    scale = (width - 2 * pad) / root.total_ns if root.total_ns > 0 else 0.0

    placed: List[Tuple[_Node, float, float, int]] = []
    omitted = 0
    stack: List[Tuple[_Node, float, int]] = [(root, 0.0, 0)]
    while stack:
        node, x, depth = stack.pop()
        w = node.total_ns * scale
        if w < min_width:
            omitted += 1
            continue
        placed.append((node, x, w, depth))
        child_x = x
        for child in sorted(node.children.values(), key=lambda c: (c.order, c.name)):
            stack.append((child, child_x, depth + 1))
            child_x += child.total_ns * scale
    max_depth = max((d for _, _, _, d in placed), default=0)
    height = top_margin + (max_depth + 1) * frame_h + bottom_margin

    warnings = _svg_warnings(trace.raw)
    subtitle = (f"{trace.events:,} events, {fmt(root.total_ns)} in frames; "
                f"width = {'sampled allocated bytes' if alloc else 'time'}; click a frame to zoom")
    if omitted:
        subtitle += f"; {omitted:,} frames under {min_width:g} px not drawn"
    title = title or f"pinsight-python: {trace.path}"
    esc = html.escape
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Verdana, sans-serif" font-size="12">\n',
        "<style>g.f:hover rect{stroke:#000;stroke-width:0.6} g.f{cursor:pointer} "
        "text{pointer-events:none}</style>\n",
        f'<rect width="{width}" height="{height}" fill="#f8f8f8"/>\n',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="16">{esc(title)}</text>\n',
        f'<text id="reset" x="{pad}" y="22" style="display:none;cursor:pointer" '
        'fill="#036">Reset zoom</text>\n',
        f'<text x="{pad}" y="{height - 10}" fill="#555">{esc(subtitle)}</text>\n',
    ]
    if warnings:
        out.append(f'<text x="{width - pad}" y="{height - 10}" text-anchor="end" fill="#b00">'
                   f"{esc('; '.join(warnings))}</text>\n")
    total = root.total_ns or 1
    for node, x, w, depth in placed:
        y = height - bottom_margin - (depth + 1) * frame_h
        tip = esc(_tooltip(node, 100.0 * node.total_ns / total, fmt, lifetimes.get(node.symbol)))
        label = _fit_label(node.labels, int((w - 6) / char_width))
        out.append(
            f'<g class="f" data-l="{esc(json.dumps(node.labels))}" data-x="{x:.3f}" '
            f'data-w="{w:.3f}" data-d="{depth}"><title>{tip}</title>'
            f'<rect x="{pad + x:.2f}" y="{y}" width="{w:.2f}" height="{frame_h - 1}" '
            f'fill="{_color(node)}" rx="2"/>'
            f'<text x="{pad + x + 3:.2f}" y="{y + frame_h - 4}">{esc(label)}</text></g>\n'
        )
    out.append(_SCRIPT % {"width": width, "pad": pad, "char_width": char_width})
    out.append("</svg>\n")
    return "".join(out)
