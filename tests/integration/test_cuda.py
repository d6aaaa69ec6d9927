"""CUDA kernels joined to the Python call that launched them (issue 23).

PInsight's CUDA provider (cupti_pinsight_lttng_ust) writes a launch as
cudaKernelLaunch_begin/_end on the launching thread, and the kernel's run on the
device later, when CUPTI hands over its buffer, as cudaKernelActivity (start_gpu,
end_gpu in CUPTI's clock, the launch's correlationId), with the clock's
calibration against CLOCK_MONOTONIC once (cuda_clock_calibration). The reader
joins each activity to the Python call around the launch with the same
correlationId and places it on the trace's time line.

This machine has no GPU, so libpinsight is built without CUDA. The first test
fires PInsight's real provider (its header, unchanged, compiled into
tests/native/cuda_standin) the way libpinsight's CUPTI callbacks fire it, with a
known kernel duration; the second runs where a GPU and CUDA's toolkit are present.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from pinsight_python.recording import lttng
from tests import perfetto_trace
from tests.tracing import SETPROFILE, clean_env, cli, isolated_session

HERE = Path(__file__).resolve().parents[1]  # tests/
PINSIGHT_SRC = HERE.parent.parent / "shared" / "pinsight" / "src"
CUPTI = "cupti_pinsight_lttng_ust"
LAUNCHES = 30
KERNEL_NS = 2_000_000  # each kernel's time on the (stand-in) device
CUPTI_AHEAD_NS = 5_000_000_000  # CUPTI's clock against CLOCK_MONOTONIC

PROGRAM = textwrap.dedent(f"""
    import ctypes, os, threading, time
    lib = ctypes.CDLL(os.environ["CUDA_STANDIN"])
    lib.standin_calibrate.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.standin_launch.argtypes = [ctypes.c_uint, ctypes.c_char_p]
    lib.standin_kernel_activity.argtypes = [ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint64,
                                            ctypes.c_char_p]
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    lib.standin_calibrate(now, now + {CUPTI_AHEAD_NS})

    def launch(i):
        lib.standin_launch(100 + i, b"saxpy")
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def other(i):
        lib.standin_launch(1000 + i, b"reduce")
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    started = [launch(i) for i in range({LAUNCHES})]
    others = [other(i) for i in range(3)]

    def deliver():  # CUPTI's buffer, delivered later on its own thread
        for i, t in enumerate(started):
            start = t + {CUPTI_AHEAD_NS} + 1000
            lib.standin_kernel_activity(100 + i, start, start + {KERNEL_NS}, b"saxpy")
        for i, t in enumerate(others):
            lib.standin_kernel_activity(1000 + i, t + {CUPTI_AHEAD_NS}, t + {CUPTI_AHEAD_NS} + 500,
                                        b"reduce")
        lib.standin_kernel_activity(99999, 1, 2, b"orphan")  # no launch in the trace
    worker = threading.Thread(target=deliver)
    worker.start()
    worker.join()
    print(os.getpid())
""")


@pytest.fixture(scope="module")
def cuda_standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    header = PINSIGHT_SRC / "cupti_lttng_ust_tracepoint.h"
    if not header.exists():
        pytest.fail(f"{header} is missing: ../shared/pinsight is PInsight's source")
    out = tmp_path_factory.mktemp("cuda") / "libcuda_standin.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{PINSIGHT_SRC}",
                    str(HERE / "native" / "cuda_standin" / "cuda_standin.c"),
                    "-llttng-ust", "-ldl", "-o", str(out)], check=True)
    return out


def run_with_standin(cuda_standin: Path, tmp_path: Path, program: str) -> Tuple[str, Path]:
    """`program` traced from its first line with the stand-in loaded (CUDA_STANDIN), in
    a session recording our provider and PInsight's CUDA one: (its pid, the trace)."""
    script = tmp_path / "app.py"
    script.write_text("import pinsight_python\npinsight_python.activate()\n" + program)
    out = tmp_path / "trace"
    env = clean_env()
    env["CUDA_STANDIN"] = str(cuda_standin)
    with isolated_session(out, events=(f"{lttng.PROVIDER}:*", f"{CUPTI}:*")) as run_as:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120, preexec_fn=run_as, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()[0], out


def test_kernels_go_to_the_python_call_that_launched_them(
    cuda_standin: Path, tmp_path: Path
) -> None:
    pid, out = run_with_standin(cuda_standin, tmp_path, PROGRAM)
    report = json.loads(cli("report", "--json", "--top", "0", "--pid", pid, str(out)))
    rows = {(r["domain"], r["name"], (r["caller"] or {}).get("qualname")): r
            for r in report["native"]}
    # Each row names the Python function that launched (issue 35, point 4) and, apart,
    # the native callee it went through: the ctypes call (the profile hook of 3.8-3.11
    # does not report ctypes calls: none there).
    via = None if SETPROFILE else "ctypes.standin_launch"
    saxpy = rows[("cuda", "saxpy", "launch")]
    assert saxpy["count"] == LAUNCHES and saxpy["via"] == via
    assert saxpy["caller"]["filename"].endswith("app.py") and saxpy["caller"]["lineno"] > 0
    assert saxpy["total_ns"] == LAUNCHES * KERNEL_NS  # the device's time, not the launch's
    reduce = rows[("cuda", "reduce", "other")]
    assert reduce["count"] == 3 and reduce["total_ns"] == 3 * 500 and reduce["via"] == via
    # An activity without its launch in the trace has no Python caller: listed.
    assert rows[("cuda", "orphan", None)]["count"] == 1
    # The launches themselves are CUDA API regions of the same calls.
    assert rows[("cuda", "cudaKernelLaunch", "launch")]["count"] == LAUNCHES
    assert rows[("cuda", "cudaKernelLaunch", "other")]["count"] == 3
    # export: the kernels on the process's GPU track, at their device time, with
    # an arrow from the launching thread.
    chrome = tmp_path / "trace.json"
    cli("export", "--pid", pid, "-o", str(chrome), str(out))
    events = json.loads(chrome.read_text())["traceEvents"]
    gpu_tids = {e["tid"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
                and e["args"]["name"] == "GPU (CUDA activity)"}
    assert len(gpu_tids) == 1
    kernels = [e for e in events if e.get("tid") in gpu_tids and e.get("name") == "[CUDA] saxpy"]
    assert len(kernels) == LAUNCHES
    assert all(e["dur"] == pytest.approx(KERNEL_NS / 1000) for e in kernels)
    launches = sorted(e["ts"] for e in events if e.get("name") == "[CUDA] cudaKernelLaunch"
                      and e.get("tid") not in gpu_tids)
    # Each kernel starts 1 us after its launch returned, in CPU time.
    assert sorted(e["ts"] for e in kernels)[0] >= launches[0]
    assert any(e.get("ph") in ("s", "f") for e in events if e.get("tid") in gpu_tids)
    # Perfetto: the kernels on their device's stream's track, each joined by a flow to
    # the call that launched it, as report attributes them, the launches too.
    pftrace = tmp_path / "trace.pftrace"
    cli("export", "--pid", pid, "-o", str(pftrace), str(out))
    exported = perfetto_trace.read(pftrace)
    # The stand-in's kernels overlap (a real stream runs them one after the other):
    # the overlapping ones on tracks of their own, as slices on one track must nest.
    gpu = [t for t in exported.tracks.values() if t.name.startswith("GPU 0, stream 7")]
    assert gpu[0].name == "GPU 0, stream 7" and exported.tracks[gpu[0].parent].pid == int(pid)
    on_gpu = [s for s in exported.slices if s.track in {t.uuid for t in gpu}]
    saxpy = [s for s in on_gpu if s.name == "[CUDA] saxpy"]
    assert len(saxpy) == LAUNCHES and all(s.end - s.ts == KERNEL_NS for s in saxpy)
    assert len(on_gpu) == LAUNCHES + 3 + 1  # the orphan too, without a flow
    assert all(s.depth == 0 for s in on_gpu)
    assert perfetto_trace.check_joins(exported, report) == 2 * (LAUNCHES + 3)


EXIT_PROGRAM = textwrap.dedent(f"""
    import ctypes, os, time
    # Global, as libcupti is when libpinsight.so loads it: found by name.
    lib = ctypes.CDLL(os.environ["CUDA_STANDIN"], mode=ctypes.RTLD_GLOBAL)
    lib.standin_calibrate.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.standin_launch.argtypes = [ctypes.c_uint, ctypes.c_char_p]
    lib.standin_kernel_activity_buffered.argtypes = [ctypes.c_uint, ctypes.c_uint64,
                                                     ctypes.c_uint64, ctypes.c_char_p]
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    lib.standin_calibrate(now, now + {CUPTI_AHEAD_NS})

    def launch(i):
        lib.standin_launch(100 + i, b"saxpy")
        start = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + {CUPTI_AHEAD_NS} + 1000
        # CUPTI keeps the record in its buffer until a flush: the program never flushes.
        lib.standin_kernel_activity_buffered(100 + i, start, start + {KERNEL_NS},
                                             MANGLED)  # as CUPTI names C++ kernels

    for i in range({LAUNCHES}):
        launch(i)
    print(os.getpid())
""").replace("MANGLED", repr(b"_ZN2at6native13reduce_kernelILi128ELi4EEEvPf"))


def test_kernels_still_buffered_at_exit_reach_the_trace(
    cuda_standin: Path, tmp_path: Path
) -> None:
    """Issue 35, point 1: a program that never flushes CUPTI loses no kernel; the
    tracer hands CUPTI's buffers over at Python's exit, while the probes exist."""
    pid, out = run_with_standin(cuda_standin, tmp_path, EXIT_PROGRAM)
    report = json.loads(cli("report", "--json", "--top", "0", "--pid", pid, str(out)))
    # Issue 35, point 3: the kernel's C++ name, as Nsight Systems shows it; the mangled
    # one kept in the JSON.
    kernels = [r for r in report["native"] if r["domain"] == "cuda"
               and r["name"] == "void at::native::reduce_kernel<128, 4>(float*)"]
    assert sum(r["count"] for r in kernels) == LAUNCHES, report["native"]
    assert sum(r["total_ns"] for r in kernels) == LAUNCHES * KERNEL_NS
    assert {r["mangled"] for r in kernels} == {"_ZN2at6native13reduce_kernelILi128ELi4EEEvPf"}
    # Text tables name it without return type, template arguments and parameters (a
    # PyTorch kernel's run to kilobytes, and a column is as wide as its longest name).
    text = cli("report", "--top", "0", "--pid", pid, str(out))
    [row] = [line for line in text.splitlines() if "[CUDA] at::native::reduce_kernel " in line]
    assert "<" not in row and "(float*)" not in row


def test_trace_with_the_cuda_domain_turns_device_activity_on(tmp_path: Path) -> None:
    """Issue 35, point 1: PInsight records kernels' device activity only when its
    configuration says device_activity = on; trace --domains cuda gives the command
    such a configuration when it has none, and warns about one that does not say."""
    show = ("import os; path = os.environ['PINSIGHT_TRACE_CONFIG_FILE']; "
            "print(path); print(open(path).read())")
    proc = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary", "--domains", "cuda",
         "-o", "t", "--", sys.executable, "-c", show],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    path, text = proc.stdout.split("\n", 1)
    assert "[CUDA.default]\ndevice_activity = on\n" in text
    assert not os.path.exists(path)  # gone with trace
    (tmp_path / "mine.txt").write_text("[Python.default]\ntrace_mode = TRACING\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary", "--domains", "cuda",
         "--config", "mine.txt", "-o", "t2", "--", sys.executable, "-c", show],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(tmp_path / "mine.txt"))
    assert "no device_activity setting" in proc.stderr and "device_activity = on" in proc.stderr


BACKWARD_PROGRAM = textwrap.dedent(f"""
    import ctypes, os, threading, time
    lib = ctypes.CDLL(os.environ["CUDA_STANDIN"])
    lib.standin_calibrate.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.standin_launch_from_worker.argtypes = [ctypes.c_uint, ctypes.c_char_p]
    lib.standin_kernel_activity.argtypes = [ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint64,
                                            ctypes.c_char_p]
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    lib.standin_calibrate(now, now + {CUPTI_AHEAD_NS})

    def backward(i):  # waits in a native call while a thread without Python launches
        lib.standin_launch_from_worker(100 + i, b"grad")

    def busy_elsewhere(ready, done):
        ready.set()
        done.wait()  # a second Python thread blocked in a native call (a lock's wait)

    for i in range(5):
        backward(i)
    ready, done = threading.Event(), threading.Event()
    other = threading.Thread(target=busy_elsewhere, args=(ready, done))
    other.start()
    ready.wait()
    time.sleep(0.05)
    lib.standin_launch_from_worker(200, b"ambiguous")
    done.set()
    other.join()
    for i in range(5):
        lib.standin_kernel_activity(100 + i, 1000 + i, 2000 + i, b"grad")
    lib.standin_kernel_activity(200, 5000, 6000, b"ambiguous")
    print(os.getpid())
""")


def test_launches_without_python_go_to_the_blocked_python_call(
    cuda_standin: Path, tmp_path: Path
) -> None:
    """Issue 35, point 2: a kernel launched by a thread that runs no Python (PyTorch's
    backward pass on its autograd engine threads) goes to the process's one Python
    call blocked in a native call at the launch's time, marked as attributed across
    threads; with several such calls it stays unattributed, and says why."""
    pid, out = run_with_standin(cuda_standin, tmp_path, BACKWARD_PROGRAM)
    report = json.loads(cli("report", "--json", "--top", "0", "--pid", pid, str(out)))
    rows = {(r["domain"], r["name"]): r for r in report["native"]}
    grad, ambiguous = rows[("cuda", "grad")], rows[("cuda", "ambiguous")]
    assert grad["count"] == 5 and ambiguous["count"] == 1
    if SETPROFILE:  # 3.8-3.11 see no ctypes call: no Python call is in a native call
        assert grad["caller"] is None and grad["attributed"] == "no_blocked_call"
    else:
        assert grad["caller"]["qualname"] == "backward", grad
        assert grad["via"] == "ctypes.standin_launch_from_worker"
        assert grad["attributed"] == "blocked_call"
        assert ambiguous["caller"] is None and ambiguous["attributed"] == "several_blocked_calls"
    text = cli("report", "--top", "0", "--pid", pid, str(out))
    if not SETPROFILE:
        assert "while this call was blocked in a native call" in text, text


ON_GPU = pytest.mark.skipif(shutil.which("nvidia-smi") is None or shutil.which("nvcc") is None,
                            reason="no GPU and CUDA toolkit on this machine")


def _pinsight_cuda_lib() -> str:
    lib = os.environ.get("PINSIGHT_CUDA_LIB")
    if not lib:
        pytest.fail("a GPU is present: build libpinsight with -DPINSIGHT_CUDA=ON and set "
                    "PINSIGHT_CUDA_LIB to it (bash scripts/gpu-check.sh does both)")
    return lib


def _trace_as_a_user_does(tmp_path: Path, script: Path) -> Dict[str, Any]:
    """`LD_PRELOAD=libpinsight.so pinsight-python trace -- python SCRIPT`: no flush in
    the program, no PInsight configuration written by hand. The report's JSON."""
    env = {**clean_env(), "LD_PRELOAD": _pinsight_cuda_lib()}
    proc = subprocess.run(
        [sys.executable, "-m", "pinsight_python.cli", "trace", "--no-summary", "-o", "trace",
         "--", sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    report: Dict[str, Any] = json.loads(cli("report", "--json", "--top", "0",
                                            str(tmp_path / "trace")))
    return report


@ON_GPU
def test_real_cuda_kernels_with_libpinsight(tmp_path: Path) -> None:  # pragma: no cover
    """Where a GPU exists (issue 35, point 5): PInsight built with PINSIGHT_CUDA=ON, two
    kernels launched from Python through ctypes, traced as a user runs it. Every kernel
    (none lost at exit) has its row under the Python function that launched it, with
    the ctypes call apart, its device time, and a C++ kernel's name demangled."""
    kernel = tmp_path / "k.cu"
    kernel.write_text('extern "C" __global__ void saxpy(float *x) { x[threadIdx.x] *= 2; }\n'
                      "__global__ void scale(float *x) { x[threadIdx.x] += 1; }\n"
                      'extern "C" void run(int n) { float *d; cudaMalloc(&d, 1024);\n'
                      "  for (int i = 0; i < n; ++i) {\n"
                      "    saxpy<<<1, 256>>>(d); scale<<<1, 256>>>(d); }\n"
                      "  cudaDeviceSynchronize(); cudaFree(d); }\n")
    so = tmp_path / "libk.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", str(kernel), "-o", str(so)],
                   check=True)
    script = tmp_path / "gpu.py"
    script.write_text(f"import ctypes\nk = ctypes.CDLL({str(so)!r})\n"
                      "def step():\n    k.run(10)\nstep()\n")
    report = _trace_as_a_user_does(tmp_path, script)
    rows = {r["name"]: r for r in report["native"] if r["domain"] == "cuda"}
    for name in ("saxpy", "scale(float*)"):
        row = rows[name]
        assert row["count"] == 10 and row["total_ns"] > 0, row
        assert row["caller"]["qualname"] == "step" and row["via"] == "ctypes.run", row
    assert rows["scale(float*)"]["mangled"] == "_Z5scalePf"


TORCH_PROGRAM = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
model = model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
def train_step(x, y):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
for _ in range(5):
    train_step(torch.randn(32, 64, device="cuda"), torch.randn(32, 8, device="cuda"))
torch.cuda.synchronize()
"""


@ON_GPU
def test_pytorch_forward_and_backward(tmp_path: Path) -> None:  # pragma: no cover
    """Where a GPU and PyTorch exist (issue 35, point 5): a small model trained a few
    steps, traced as a user runs it. Kernels reach the trace with device time (none
    lost at exit), with readable names, each under the innermost Python function that
    launched it (the forward pass's under Linear.forward, through torch's linear); the
    backward pass's, launched by autograd's engine threads, under the Python call
    blocked in run_backward, marked as attributed across threads; the rest counted and
    named as launched where no Python call saw them."""
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(TORCH_PROGRAM)
    report = _trace_as_a_user_does(tmp_path, script)
    kernels = [r for r in report["native"] if r["domain"] == "cuda"
               and not r["name"].startswith(("cuda", "cu"))]
    assert sum(r["count"] for r in kernels) > 50, report["native"]
    assert all(r["total_ns"] > 0 for r in kernels)
    assert not [r for r in kernels if r["name"].startswith("_Z")]  # demangled
    assert all(r["name"] != r["mangled"] for r in kernels if "mangled" in r)

    def rows(qualname: str, via: str, attributed: str) -> list:
        return [r for r in kernels if r["caller"] and r["caller"]["qualname"] == qualname
                and r["via"] == via and r["attributed"] == attributed]

    forward = rows("Linear.forward", "torch._C._nn.linear", "own_thread")
    backward = rows("_engine_run_backward", "torch._C._EngineBase.run_backward",
                    "blocked_call")
    assert forward and backward, [(r["caller"], r["via"], r["attributed"]) for r in kernels]
    # Five steps: each of the forward's and the backward's kernels ran once per step.
    assert sum(r["count"] for r in backward) >= 5 * 3
    # No kernel is left without a caller but for a reason the row gives.
    assert all(r["caller"] or r["attributed"] in ("no_launch", "no_blocked_call",
                                                  "several_blocked_calls") for r in kernels)
