"""Turning `[strategy]` into a tf.distribute strategy on the devices this machine has.

One config runs on a GPU box and on a laptop: with no GPU visible and `cpu_replicas = N`, the CPU
is split into N logical devices. TensorFlow fixes its logical devices when the runtime starts, so
a process (a test session) that already split the CPU keeps its split and we use the first N.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence
from typing import Any

from distagent.schema import StrategyConfig
from distagent.strategy_setup import StrategySetup
from distcore.errors import DistmonError
from distcore.wording import counted


def resolve_strategy(cfg: StrategyConfig, *, cluster: Any = None) -> StrategySetup:
    """Build the strategy `cfg` asks for; multi_worker is handed to `distagent.cluster`."""
    if cfg.kind == "multi_worker":
        return _multi_worker(cfg, cluster)
    import tensorflow as tf

    devices, on_gpu = _local_devices(tf, cfg)
    warnings: list[str] = []
    if cfg.kind == "one_device":
        strategy = tf.distribute.OneDeviceStrategy(devices[0])
        devices = devices[:1]
    else:
        ops = _cross_device_ops(tf, cfg.cross_device_ops, on_gpu, warnings)
        strategy = tf.distribute.MirroredStrategy(devices=list(devices), cross_device_ops=ops)
    return StrategySetup(strategy, tuple(devices), len(devices), 1, 0, tuple(warnings))


def _multi_worker(cfg: StrategyConfig, cluster: Any) -> StrategySetup:
    try:
        module = importlib.import_module("distagent.cluster")
    except ImportError:
        module = None
    resolve = getattr(module, "resolve_multi_worker", None)
    if resolve is None:
        raise DistmonError(
            'strategy.kind = "multi_worker" is not available in this build '
            "(distagent.cluster.resolve_multi_worker is missing)"
        )
    setup = resolve(cfg, cluster)
    assert isinstance(setup, StrategySetup)
    return setup


def _local_devices(tf: Any, cfg: StrategyConfig) -> tuple[tuple[str, ...], bool]:
    """The devices to mirror over, and whether they are GPUs."""
    gpus = tf.config.list_physical_devices("GPU")
    if cfg.devices:
        return _named_devices(tf, cfg.devices), any("GPU" in d.upper() for d in cfg.devices)
    if gpus:
        return tuple(d.name for d in tf.config.list_logical_devices("GPU")), True
    if cfg.cpu_replicas > 0:
        return split_cpu(tf, cfg.cpu_replicas), False
    return (tf.config.list_logical_devices("CPU")[0].name,), False


def _named_devices(tf: Any, names: Sequence[str]) -> tuple[str, ...]:
    known = {d.name.split("device:")[-1].upper(): d.name for d in tf.config.list_logical_devices()}
    missing = [n for n in names if n.split("/")[-1].upper().replace("DEVICE:", "") not in known]
    if missing:
        raise DistmonError(
            f"strategy.devices: {', '.join(missing)} not found; this machine has "
            f"{', '.join(sorted(known)) or 'no devices'}"
        )
    return tuple(known[n.split("/")[-1].upper().replace("DEVICE:", "")] for n in names)


def split_cpu(tf: Any, replicas: int) -> tuple[str, ...]:
    """N logical CPU devices: made now if the runtime has not started, else the first N."""
    cpus = tf.config.list_physical_devices("CPU")
    # RuntimeError: already initialised; whatever split exists is fixed for this process.
    with contextlib.suppress(RuntimeError):
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
        )
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < replicas:
        raise DistmonError(
            f"strategy.cpu_replicas = {replicas}, but TensorFlow was already started in this "
            f"process with {counted(len(logical), 'logical CPU device')}; split the CPU "
            "before TensorFlow "
            "starts, or lower cpu_replicas"
        )
    return tuple(d.name for d in logical[:replicas])


def _cross_device_ops(tf: Any, kind: str, on_gpu: bool, warnings: list[str]) -> Any:
    if kind == "auto":
        # MirroredStrategy picks NCCL on GPUs itself; on CPUs, reduce to one device.
        return None if on_gpu else tf.distribute.ReductionToOneDevice()
    if kind == "one_device":
        return tf.distribute.ReductionToOneDevice()
    if not on_gpu:
        warnings.append(f'strategy.cross_device_ops = "{kind}" needs GPUs; using one_device '
                        "reduction on CPU replicas")
        return tf.distribute.ReductionToOneDevice()
    if kind == "nccl":
        return tf.distribute.NcclAllReduce()
    return tf.distribute.HierarchicalCopyAllReduce()
