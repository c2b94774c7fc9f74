"""Datasheet peak FLOP/s by GPU model and precision: the denominator of model FLOPs utilisation.

Dense figures (NVIDIA quotes tensor-core peaks "with sparsity" too: those are twice these, and no
dense model reaches them). Each row names the datasheet it was read from. A GPU is matched by its
NVML name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4"); a model not listed (an
H100 NVL, a consumer card) has no peak, and `telemetry.peak_tflops` names one.

The precision is the one the job's matrix multiplies run in: float16 under
`train.mixed_precision` (Keras' mixed_float16), else TF32 where the GPU has it (TensorFlow runs
float32 matmuls and convolutions in TF32 on Ampere and newer unless told otherwise), else FP32.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

Dtype = Literal["fp32", "tf32", "bf16", "fp16"]
DTYPES: Final = ("fp32", "tf32", "bf16", "fp16")
MEASURED: Final = "measured"
CONFIGURED: Final = "telemetry.peak_tflops"
MAX_PEAK_TFLOPS: Final = 100_000.0
"""The largest telemetry.peak_tflops accepted (per device): above any chip's peak."""
MIN_PEAK_TFLOPS: Final = 0.001
"""The smallest telemetry.peak_tflops other than 0 (per device): a GFLOP/s, below any CPU's.
MFU divides by it: a denormal (1e-320) would make every MFU infinite."""


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU model's dense peaks in TFLOP/s (None: the precision has no tensor path)."""

    model: str
    pattern: str
    """A regular expression searched in NVML's device name."""
    fp32: float
    tf32: float | None
    bf16: float | None
    fp16: float
    source: str


_A100 = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_V100 = ("https://images.nvidia.com/content/technologies/volta/pdf/"
         "volta-v100-datasheet-update-us-1165301-r5.pdf")

PEAKS: Final = (
    # Hopper's PCIe board before the SXM rows: both names say H100.
    GpuPeaks("H100 PCIe", r"H100\b.*PCIe", 51.0, 378.0, 756.0, 756.0,
             "https://www.nvidia.com/en-us/data-center/h100/"),
    GpuPeaks("H100 SXM", r"H100\b.*(SXM|HBM3)", 67.0, 494.7, 989.4, 989.4,
             "https://www.nvidia.com/en-us/data-center/h100/"),
    GpuPeaks("H200", r"H200\b(?!.*NVL)", 67.0, 494.7, 989.4, 989.4,
             "https://www.nvidia.com/en-us/data-center/h200/"),
    GpuPeaks("A100", r"A100\b", 19.5, 156.0, 312.0, 312.0, _A100),
    GpuPeaks("L40S", r"L40S\b", 91.6, 183.0, 362.05, 362.05,
             "https://www.nvidia.com/en-us/data-center/l40s/"),
    GpuPeaks("L4", r"\bL4\b", 30.3, 60.0, 121.0, 121.0,
             "https://www.nvidia.com/en-us/data-center/l4/"),
    GpuPeaks("A10", r"\bA10\b", 31.2, 62.5, 125.0, 125.0,
             "https://www.nvidia.com/en-us/data-center/products/a10-gpu/"),
    GpuPeaks("V100 PCIe", r"V100\b.*PCIE", 14.0, None, None, 112.0, _V100),
    GpuPeaks("V100 SXM2", r"V100\b", 15.7, None, None, 125.0, _V100),
    GpuPeaks("T4", r"\bT4\b", 8.1, None, None, 65.0,
             "https://www.nvidia.com/en-us/data-center/tesla-t4/"),
)


@dataclass(frozen=True)
class Peak:
    """A peak FLOP/s and where it came from, for one device (a GPU, or a CPU host)."""

    flops_per_second: float
    source: str
    """`datasheet <model> <dtype> dense (<url>)`, `measured (...)` or `telemetry.peak_tflops`."""


def gpu_peaks(name: str) -> GpuPeaks | None:
    """The table's row for an NVML device name, or None for a model it does not list."""
    return next((row for row in PEAKS if re.search(row.pattern, name, re.IGNORECASE)), None)


def job_dtype(mixed_precision: bool, tf32_enabled: bool = True) -> Dtype:
    """The precision a job's matrix multiplies run in (before the GPU's own support)."""
    if mixed_precision:
        return "fp16"
    return "tf32" if tf32_enabled else "fp32"


def datasheet_peak(name: str, dtype: Dtype) -> Peak | None:
    """The dense peak of GPU `name` in `dtype`; TF32 falls back to FP32 on a GPU without it
    (Volta, Turing run float32 as float32). None: a model the table does not list."""
    row = gpu_peaks(name)
    if row is None:
        return None
    used: Dtype = "fp32" if dtype == "tf32" and row.tf32 is None else dtype
    tflops = getattr(row, used)
    if tflops is None:  # bf16 on Volta or Turing: no such tensor path
        return None
    return Peak(tflops * 1e12, f"datasheet {row.model} {used} dense ({row.source})")


def configured_peak(tflops: float) -> Peak:
    return Peak(tflops * 1e12, CONFIGURED)


def measured_peak(flops_per_second: float, what: str) -> Peak:
    return Peak(flops_per_second, f"{MEASURED} ({what})")


def si_rate(flops_per_second: float) -> str:
    """`989.4 TFLOP/s`, `67.4 GFLOP/s`: three significant figures and an SI prefix."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(flops_per_second) >= factor:
            return f"{flops_per_second / factor:.4g} {prefix}FLOP/s"
    return f"{flops_per_second:.4g} FLOP/s"
