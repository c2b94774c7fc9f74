"""`distmon --serve --metrics` over a `host:PATH` source: a real OpenSSH server on 127.0.0.1 whose
PATH holds a stand-in `nvidia-smi` (no GPU here) printing the real tool's CSV and dmon's GPM
rows; its GPUs are series with `source="ssh"`, its runs' scalars are scalars like any other."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.test_remote_ssh import halves
from tests.kit.sshd import HOST_ALIAS, Sshd
from tests.kit.wait import wait_until
from tests.kit.writers import write_scalars
from tests.tui.test_serve import Serve, sample, scrape

pytestmark = pytest.mark.slow
UUID = "GPU-5c8b3d1e-0000-4a4b-8c8c-00000000000"


def test_an_ssh_hosts_gpus_and_runs_are_exported(sshd: Sshd, tmp_path: Path) -> None:
    write_scalars(tmp_path / "runs" / "exp" / "train", halves(range(5)))
    serve = Serve(tmp_path, ["--metrics", "0", "--refresh", "0.5", "--ssh-config",
                             str(sshd.config), f"{HOST_ALIAS}:{tmp_path}/runs"])  # fmt: skip
    try:
        port = serve.port()

        def ready() -> str:  # "" until the host's GPUs, their GPM and the run are all there
            text = scrape(port)
            gpu = sample(text, "distmon_gpu_memory_used_bytes", source="ssh", gpu="1")
            gpm = sample(text, "distmon_gpu_sm_activity_ratio", source="ssh", gpu="1")
            return text if None not in (gpu, gpm) and 'tag="loss"' in text else ""

        try:
            text = wait_until(ready)
        except AssertionError:  # what it had instead
            raise AssertionError(f"{serve.stderr()}\n{scrape(port)}") from None
    finally:
        assert serve.stop() == 0, serve.stderr()
    ssh = {"host": HOST_ALIAS, "source": "ssh"}
    assert sample(text, "distmon_gpu_utilization_ratio", **ssh, gpu="0", uuid=f"{UUID}1") == 0.87
    # The MIG GPU's utilization is N/A: absent, while its memory is known.
    assert sample(text, "distmon_gpu_utilization_ratio", **ssh, gpu="1") is None
    assert sample(text, "distmon_gpu_memory_used_bytes", **ssh, gpu="1") == 13 * 1024 * 1024
    assert sample(text, "distmon_gpu_power_watts", **ssh, gpu="0") == pytest.approx(512.33)
    assert sample(text, "distmon_host_reachable", **ssh) == 1
    # GPM from dmon's rows, as a ratio like local GPUs'.
    assert sample(text, "distmon_gpu_sm_activity_ratio", **ssh, gpu="0") == pytest.approx(0.34)
    assert sample(text, "distmon_gpu_tensor_activity_ratio", **ssh, gpu="1") == pytest.approx(0.48)
    assert sample(text, "distmon_gpu_dram_bandwidth_ratio", **ssh, gpu="0") == pytest.approx(0.57)
    assert sample(text, "distmon_scalar_step", tag="loss") == 4
