"""The datasheet peaks: NVML's names to rows, the job's precision to a column, sources given."""

from __future__ import annotations

import pytest

from distcore.telemetry.peaks import PEAKS, datasheet_peak, gpu_peaks, job_dtype, si_rate


@pytest.mark.parametrize(
    ("nvml_name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("Tesla T4", "T4"),
        ("NVIDIA H100 NVL", None),  # another board's clocks: not guessed
        ("NVIDIA H200 NVL", None),
        ("NVIDIA GeForce RTX 4090", None),
        ("NVIDIA A40", None),
    ],
)
def test_nvml_names_find_their_row(nvml_name: str, model: str | None) -> None:
    row = gpu_peaks(nvml_name)
    assert (row.model if row is not None else None) == model


@pytest.mark.parametrize(
    ("nvml_name", "dtype", "tflops", "used"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4, "bf16"),
        ("NVIDIA H100 80GB HBM3", "fp16", 989.4, "fp16"),
        ("NVIDIA H100 80GB HBM3", "tf32", 494.7, "tf32"),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0, "tf32"),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5, "fp32"),
        ("Tesla T4", "tf32", 8.1, "fp32"),  # no TF32 on Turing: float32 runs as float32
        ("Tesla V100-SXM2-16GB", "fp16", 125.0, "fp16"),
        ("Tesla V100-SXM2-16GB", "bf16", None, None),  # no bf16 tensor path
    ],
)
def test_datasheet_peak_by_precision(nvml_name: str, dtype: str, tflops: float | None,
                                     used: str | None) -> None:
    peak = datasheet_peak(nvml_name, dtype)  # type: ignore[arg-type]
    if tflops is None:
        assert peak is None
        return
    assert peak is not None and peak.flops_per_second == pytest.approx(tflops * 1e12)
    assert peak.source.startswith("datasheet ") and f" {used} dense (https://" in peak.source


def test_every_row_has_a_datasheet_and_tensor_peaks_above_fp32() -> None:
    for row in PEAKS:
        assert row.source.startswith("https://www.nvidia.com/") or \
            row.source.startswith("https://images.nvidia.com/")
        assert row.fp16 > row.fp32 and (row.tf32 is None or row.tf32 > row.fp32)


@pytest.mark.parametrize(
    ("mixed", "tf32", "dtype"), [(True, True, "fp16"), (False, True, "tf32"),
                                 (False, False, "fp32"), (True, False, "fp16")],
)
def test_the_jobs_precision(mixed: bool, tf32: bool, dtype: str) -> None:
    assert job_dtype(mixed, tf32) == dtype


@pytest.mark.parametrize(
    ("value", "text"), [(989.4e12, "989.4 TFLOP/s"), (6.742e10, "67.42 GFLOP/s"),
                        (1.5e15, "1.5 PFLOP/s"), (12.0, "12 FLOP/s")],
)
def test_si_rate(value: float, text: str) -> None:
    assert si_rate(value) == text
