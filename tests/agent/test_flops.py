"""Model FLOPs from TensorFlow's cost accounting against a hand count, and the plan's figures."""

from __future__ import annotations

import math
from typing import Any

import pytest

from distagent.config import config_from_dict

SHAPES = {"mlp": (28, 28, 1), "cnn": (28, 28, 1)}


def hand_count(model: Any) -> float:
    """2 × the multiply-accumulates of every Dense and Conv2D layer, from the built layers'
    own shapes (no formula per model)."""
    import keras

    macs = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Dense):
            macs += layer.kernel.shape[0] * layer.kernel.shape[1]
        elif isinstance(layer, keras.layers.Conv2D):
            kh, kw, cin, cout = layer.kernel.shape
            outputs = math.prod(layer.output.shape[1:3])
            macs += outputs * kh * kw * cin * cout
    return 2.0 * macs


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_forward_flops_are_tensorflows_count_within_10_percent_of_a_hand_count(
    tf: Any, name: str
) -> None:
    from distagent.flops import forward_flops
    from distagent.models import build_model

    model = build_model(name, SHAPES[name], 10)
    counted = forward_flops(model, SHAPES[name])
    expected = hand_count(model)
    assert expected > 0 and counted is not None
    assert abs(counted - expected) / expected < 0.10


def test_the_plan_counts_a_step_as_three_forward_passes_of_the_global_batch(tf: Any) -> None:
    from distagent.commands.plan import format_plan, resolve_plan
    from distagent.models import build_model

    cfg = config_from_dict({
        "model": {"name": "cnn"},
        "data": {"per_replica_batch_size": 8, "synthetic": {"num_examples": 64}},
        "strategy": {"cpu_replicas": 2},
        "telemetry": {"peak_tflops": 2.5},
    })
    plan = resolve_plan(cfg)
    forward = plan.forward_flops_per_example
    assert forward is not None and abs(forward - hand_count(build_model("cnn", SHAPES["cnn"],
                                                                        10))) / forward < 0.10
    assert plan.flops_per_example == pytest.approx(3 * forward)
    assert plan.flops_per_step == pytest.approx(3 * forward * plan.global_batch_size)
    # CPU replicas share one host: the peak counts the host once, as configured.
    assert (plan.peak_devices, plan.peak_source) == (1, "telemetry.peak_tflops")
    assert plan.peak_flops_per_second == pytest.approx(2.5e12)
    text = format_plan(cfg, plan)
    assert f"FLOPs per step {plan.flops_per_step:.3e}, per example" in text
    assert "2.5 TFLOP/s = 1 × 2.5 TFLOP/s, telemetry.peak_tflops" in text


def test_cpu_replicas_get_a_measured_peak(tf: Any) -> None:
    from distagent.flops import device_peak

    peak, why = device_peak(on_gpu=False, mixed_precision=False)
    assert why is None and peak is not None
    assert peak.source.startswith("measured") and peak.flops_per_second > 1e8


def test_a_gpu_the_table_does_not_list_asks_for_the_config(tf: Any) -> None:
    from distagent.flops import device_peak

    peak, why = device_peak(on_gpu=True, mixed_precision=True,
                            gpu_name=lambda: "NVIDIA GeForce GT 710")
    assert peak is None and why is not None
    assert "no datasheet peak for NVIDIA GeForce GT 710 in fp16" in why
    assert "telemetry.peak_tflops" in why
    peak, why = device_peak(on_gpu=True, mixed_precision=True,
                            gpu_name=lambda: "NVIDIA H100 80GB HBM3")
    assert why is None and peak is not None and peak.flops_per_second == pytest.approx(989.4e12)
