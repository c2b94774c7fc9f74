"""Cost of one telemetry tick: per GPU (simulated; real NVML where a driver exists) and per host
sample, against the tools users script today: `nvidia-smi --query-gpu=... --format=csv` for the
GPUs, and plain psutil calls for the host. Prints medians and ratios.

Run: .venv/bin/python bench/telemetry.py

`--gpu-check` (for a machine with an NVIDIA GPU; PyTorch optional): keeps GPU 0 busy with a
small PyTorch job, runs the sampler against real NVML for a few seconds, and prints the
snapshot, the utilization history and whether the job's pid shows in the GPU process list.
Without the venv: PYTHONPATH=shared python bench/telemetry.py --gpu-check
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from distcore.telemetry import make_source
from distcore.telemetry.host import PsutilHostReader
from distcore.telemetry.jsonify import telemetry_to_json
from distcore.telemetry.nvml import NvmlGpuSource
from distcore.telemetry.sampler import TelemetrySampler
from distcore.telemetry.simulated import SimulatedGpuSource

SMI_QUERY = (
    "index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,"
    "temperature.gpu,power.draw,power.limit,clocks.sm,fan.speed"
)


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: first calls pay for imports and NVML init
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def bench_simulated(gpus: int = 8) -> None:
    source = SimulatedGpuSource(gpus)
    tick = median_seconds(source.read, 2000)
    print(f"simulated source, {gpus} GPUs: {us(tick)} per tick, {us(tick / gpus)} per GPU")


def bench_host() -> None:
    pids = [os.getpid()]
    source = PsutilHostReader(pids, min_window=0.0)
    ours = median_seconds(source.sample, 300)

    def plain_psutil() -> None:
        psutil.cpu_percent(percpu=True)
        psutil.virtual_memory()
        os.getloadavg()
        proc = psutil.Process()
        proc.cpu_percent()
        proc.memory_info()

    anchor = median_seconds(plain_psutil, 300)
    cores = psutil.cpu_count()
    print(f"host sample ({cores} cores, 1 watched pid): {us(ours)}")
    print(f"  anchor, plain psutil calls for the same numbers: {us(anchor)}"
          f"  -> ratio ours/anchor = {ours / anchor:.2f}")


def bench_wrapper_overhead(gpus: int = 8) -> None:
    """Our per-GPU Python cost around NVML, with the tests' fake pynvml (no driver calls)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.core.fake_pynvml import FakeGpu, FakeNvml

    fake = FakeNvml([FakeGpu() for _ in range(gpus)])
    source = NvmlGpuSource(fake, identify=lambda _: (None, None))
    tick = median_seconds(source.read, 1000)
    source.close()
    print(f"NVML wrapper overhead, fake pynvml, {gpus} GPUs: {us(tick / gpus)} per GPU"
          " (Python only, the fake's included; the driver's own time comes on top)")


def bench_nvml() -> float | None:
    """Median seconds of one full NVML tick over all GPUs, or None without a driver."""
    probe = NvmlGpuSource()
    status, devices = probe.read()
    if not devices:
        probe.close()
        print(f"real NVML: not measured — {status.reason}")
        return None
    count = len(devices)
    full = median_seconds(probe.read, 30)
    probe.close()
    lean = NvmlGpuSource(pcie=False)
    without_pcie = median_seconds(lean.read, 100)
    lean.close()
    print(f"real NVML, {count} GPUs: {us(full)} per tick, {us(full / count)} per GPU")
    print(f"  without PCIe counters (NVML samples the bus ~20 ms each): "
          f"{us(without_pcie / count)} per GPU")
    return full


def bench_nvidia_smi(nvml_tick: float | None) -> None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        print("anchor nvidia-smi --query-gpu=... --format=csv: nvidia-smi not found on this host"
              " — no anchor measured, no ratio")
        return
    command = [smi, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"]
    anchor = median_seconds(lambda: subprocess.run(command, capture_output=True, check=False), 10)
    print(f"anchor nvidia-smi --query-gpu=... --format=csv (one call, all GPUs): {us(anchor)}")
    if nvml_tick is not None:
        print(f"  -> ratio nvidia-smi / our NVML tick = {anchor / nvml_tick:.1f}x")


TORCH_LOAD = """
import sys, time, torch
x = torch.randn(8192, 8192, device="cuda")
end = time.time() + float(sys.argv[1])
while time.time() < end:
    y = x @ x
    torch.cuda.synchronize()
"""


def _torch_load(seconds: float) -> subprocess.Popen[bytes] | None:
    try:
        import torch
    except ImportError:
        print("PyTorch not installed: sampling an idle GPU")
        return None
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device: sampling an idle GPU")
        return None
    return subprocess.Popen([sys.executable, "-c", TORCH_LOAD, str(seconds)])


def gpu_check(seconds: float = 8.0) -> None:
    load = _torch_load(seconds + 10.0)
    time.sleep(3.0 if load else 0.0)  # CUDA context creation before the GPU gets busy
    pids = [load.pid] if load else []
    sampler = TelemetrySampler(make_source(pids=pids), interval=0.5)
    sampler.start()
    time.sleep(seconds)
    sampler.close()
    snap = sampler.latest()
    if load is not None:
        load.terminate()
        load.wait()
    assert snap is not None
    gpus, host = telemetry_to_json(snap)
    print(json.dumps({"gpus": gpus, "host": host}, indent=2, ensure_ascii=False))
    print("gpu/0/utilization history:", sampler.history("gpu/0/utilization"))
    print("gpu/0/power_w history:", sampler.history("gpu/0/power_w"))
    for pid in pids:
        shown = any(p.pid == pid for d in snap.devices for p in d.processes)
        print(f"torch pid {pid} in the GPU process list: {'yes' if shown else 'no'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog="Run: .venv/bin/python bench/telemetry.py  (no arguments: the benchmark)")
    parser.add_argument("--gpu-check", action="store_true",
                        help="on a machine with an NVIDIA GPU: sample real NVML for a few "
                             "seconds while PyTorch (optional) keeps GPU 0 busy, and print "
                             "what was seen")
    args = parser.parse_args()
    if args.gpu_check:
        gpu_check()
        return
    print("telemetry tick cost (medians)")
    bench_simulated()
    bench_host()
    bench_wrapper_overhead()
    bench_nvidia_smi(bench_nvml())


if __name__ == "__main__":
    main()
