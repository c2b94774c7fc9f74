"""TensorBoard's Rust data server (`tensorboard --load_fast`, its default loader when the
`tensorboard-data-server` package is installed) started on a logdir and asked over its gRPC
data-provider API, every point kept: the reference distmon's reading is compared with."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

INSTALLS = "pip install -e '.[test]' installs it (make test does)"


@contextmanager
def data_server(logdir: Path, *plugins: str) -> Iterator[Any]:
    """A GrpcDataProvider over one load cycle of `logdir`, keeping every point of `plugins`."""
    grpc = pytest.importorskip("grpc", reason=f"grpcio missing: {INSTALLS}")
    server = pytest.importorskip("tensorboard_data_server",
                                 reason=f"tensorboard-data-server missing: {INSTALLS}")
    from tensorboard.data import grpc_provider
    from tensorboard.data.proto import data_provider_pb2_grpc

    samples = ",".join(f"{plugin}=all" for plugin in plugins)
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        proc = subprocess.Popen(
            [server.server_binary(), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", "0",
             "--port-file", str(port_file), "--reload", "once", "-v",
             f"--samples-per-plugin={samples}"],
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                if "Finished load cycle" in line:
                    break
            address = f"127.0.0.1:{int(port_file.read_text())}"
            with grpc.insecure_channel(address) as channel:
                stub = data_provider_pb2_grpc.TensorBoardDataProviderStub(channel)
                yield grpc_provider.GrpcDataProvider(address, stub)
        finally:
            proc.kill()
            proc.wait()
