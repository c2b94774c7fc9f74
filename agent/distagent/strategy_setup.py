"""What building a strategy gives the training job: the strategy, its devices and replicas.

Its own module (a leaf) so that `distagent.devices` (one machine) and `distagent.cluster.strategy`
(many) both return it without importing each other: devices hands multi_worker to the cluster
package, which used to import this class back from devices, a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StrategySetup:
    strategy: Any
    """The tf.distribute.Strategy to build the model and run the steps in."""
    devices: tuple[str, ...]
    """This worker's devices (full logical names)."""
    replicas: int
    """Replicas over all workers (= strategy.num_replicas_in_sync)."""
    workers: int
    task_index: int = 0
    warnings: tuple[str, ...] = ()
    """Fallbacks taken (e.g. NCCL asked for on CPU replicas); callers print them."""
    hosts: int = 1
    """Distinct machines among the workers: CPU replicas share their host's cores, so a host's
    peak counts once however many workers run on it."""
