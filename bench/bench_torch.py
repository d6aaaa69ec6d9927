"""What tracing the Python layer costs a PyTorch training loop, the workload this tracer
is for: a small model's training steps (forward, loss, backward, optimizer step) on the
GPU, or the CPU where there is none, against untraced steps measured in the same run.

    python bench/bench_torch.py [--repeat N] [--steps N] [--device cuda|cpu]
        [--configs untraced,cProfile,trace0,batched,batched-function]

Each configuration runs in a child of its own, interleaved with the others, every round
inside one LTTng session with `trace`'s defaults (as bench_core.py); the minimum of N
rounds is kept. The model is built and warmed up (30 steps: CUDA's context, cuBLAS's
handles, the allocator's pools) before the tool starts, so the figure is the steady
state's; the timed steps end with a device synchronisation. Printed: ms per step, the
time over untraced, the Python events per step our tracer emitted and the ns each added
(time added over events). Needs torch (not a dependency of this package); exits 2
without it. GPU machines run it as the README says (GPU checks).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import GID, SETUP, installed, load_average, print_paired, run_code

CONFIGS = ("untraced", "cProfile", "trace0", "batched", "batched-function")
OURS = ("batched", "batched-function")

RUNNER = """
import sys, time, torch
start = stop = lambda: None
{setup}
device = {device!r}
torch.manual_seed(0)
layers = []
for _ in range(4):
    layers += [torch.nn.Linear({width}, {width}), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers, torch.nn.Linear({width}, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn({batch}, {width}, device=device)
y = torch.randint(0, 10, ({batch},), device=device)

def train_step():
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()

def synchronize():
    if device == "cuda":
        torch.cuda.synchronize()

for _ in range(30):
    train_step()
synchronize()
start()
events0 = 0
if {is_pinsight}:
    import pinsight_python
    events0 = pinsight_python.status()["events_emitted"]
t0 = time.perf_counter()
for _ in range({steps}):
    train_step()
synchronize()
t1 = time.perf_counter()
events = 0
if {is_pinsight}:
    events = pinsight_python.status()["events_emitted"] - events0
stop()
print("bench-result", t1 - t0, events)
"""


def run(config: str, args: argparse.Namespace, tmp: Path) -> Tuple[float, int]:
    code = RUNNER.format(setup=SETUP.get(config, ""), device=args.device, width=args.width,
                         batch=args.batch, steps=args.steps, is_pinsight=config in OURS)
    return run_code(code, tmp)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the minimum is kept")
    parser.add_argument("--steps", type=int, default=300, help="timed training steps")
    parser.add_argument("--width", type=int, default=512, help="the model's hidden width")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="default: cuda where torch sees a GPU, else cpu")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_torch: needs torch (pip install torch); it is not a dependency",
              file=sys.stderr)
        return 2
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    wanted = [c for c in args.configs.split(",") if c]
    unknown = sorted(set(wanted) - set(CONFIGS))
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)}; expected some of "
                     f"{', '.join(CONFIGS)}")
    configs = installed(["untraced", *[c for c in wanted if c != "untraced"]])
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"torch {torch.__version__} on {device}; {args.steps} steps of a "
          f"{args.width}-wide 4-layer MLP, batch {args.batch}")
    print(f"load average before: {load_average()}")

    from pinsight_python.recording import lttng

    runs: Dict[str, List[float]] = collections.defaultdict(list)
    events: Dict[str, int] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-torch-"))
    try:
        for round_ in range(args.repeat):
            trace = tmp / f"trace-{round_}"
            with lttng.Session(trace, track_vgid=GID):
                for config in configs:
                    seconds, n = run(config, args, tmp)
                    runs[config].append(seconds)
                    if config in OURS:
                        events[config] = n
            shutil.rmtree(trace, ignore_errors=True)
            # Each round as it ends: a run cut short by a time limit still says something.
            print(f"round {round_ + 1}: " + ", ".join(
                f"{c} {runs[c][-1] / args.steps * 1e3:.3f}" for c in configs) + " ms per step",
                flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after: {load_average()}\n")
    best = {c: min(v) for c, v in runs.items()}
    base = best["untraced"]
    print(f"min of {args.repeat} interleaved rounds\n")
    print("| | ms per step | time / untraced | events per step | ns per event added |")
    print("|---|---:|---:|---:|---:|")
    for config in configs:
        n = events.get(config, 0)
        per_step = n / args.steps if n else None
        added = (best[config] - base) / n * 1e9 if n else None
        print(f"| {config} | {best[config] / args.steps * 1e3:.3f} | {best[config] / base:.3f}x | "
              f"{'-' if per_step is None else f'{per_step:,.0f}'} | "
              f"{'-' if added is None else f'{added:.1f}'} |")
    print_paired("Time added over untraced, ours / theirs, median of the rounds' own ratios",
                 [(o, t) for o in OURS for t in ("cProfile", "trace0")], runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
