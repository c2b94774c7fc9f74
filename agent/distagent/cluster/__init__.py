"""Training across machines: MultiWorkerMirroredStrategy from TF_CONFIG, Slurm or the config.

- `layout`: who is in the cluster and who this process is (pure, no TensorFlow).
- `strategy`: TF_CONFIG, the coordination service's timeouts, the strategy (`ClusterSetup`).
- `faults`: a lost worker named in one line.
- `leave`, `scheduler`: a worker's orderly exit, and what Slurm says of the job.

`distagent.devices.resolve_strategy` looks up `resolve_multi_worker` here; the TensorFlow parts
are imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import Any

from distagent.cluster.layout import ClusterError, ClusterLayout, resolve_layout


def resolve_multi_worker(cfg: Any, cluster: Any) -> Any:
    """See `distagent.cluster.strategy.resolve_multi_worker`."""
    from distagent.cluster.strategy import resolve_multi_worker as _resolve

    return _resolve(cfg, cluster)


__all__ = ["ClusterError", "ClusterLayout", "resolve_layout", "resolve_multi_worker"]
