"""The shipped Prometheus files checked by promtool, and a real Prometheus (Debian's `prometheus`,
started here from a temporary directory on a free loopback port, never the system's service)
scraping a real `distmon --serve --metrics` and answering PromQL over its HTTP API."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcore.metrics import label_text
from tests.kit.net import free_port
from tests.kit.wait import wait_until
from tests.kit.writers import write_job
from tests.tui.test_serve import Serve

CONFIGS = Path(__file__).resolve().parents[2] / "sample_configs" / "prometheus"
INSTALL = "install Debian's prometheus package (apt-get install prometheus; .ci/run does it)"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
# A job directory whose name a Prometheus label must carry: quotes, a backslash, a newline and
# bytes that are not UTF-8.
HOSTILE = b'we"ird\\job\nname\xff'

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason=f"no promtool: {INSTALL}")


def promtool(*args: str) -> str:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=CONFIGS,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_promtool
def test_the_shipped_rules_pass_promtool_check() -> None:
    assert "SUCCESS: 19 rules found" in promtool("check", "rules", "distmon-rules.yml")


@needs_promtool
def test_the_shipped_rules_pass_their_unit_tests() -> None:
    assert "SUCCESS" in promtool("test", "rules", "distmon-rules.test.yml")


@needs_promtool
def test_the_shipped_scrape_config_is_valid() -> None:
    assert "is valid prometheus config file syntax" in promtool("check", "config", "prometheus.yml")


@needs_promtool
def test_the_exposition_passes_promtools_lint_with_hostile_names() -> None:
    """`promtool check metrics`: Prometheus' naming conventions (units, no type in the name) and
    a valid exposition, over every family (GPUs, hosts, alerts) and control characters in tags."""
    from tests.core.test_metrics import exposition, snapshot
    from tests.tui.fixed import keras_job, run, series, system_run

    runs = [*keras_job("q", wait=0.3), system_run("q", 0, host="n"),
            run('x"\\\n/train', series("nul\x00tag\x01\x7f\udcff", [1.0]))]  # fmt: skip
    text = exposition(snapshot(runs, gpus=1))
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0 and not done.stdout + done.stderr, done.stdout + done.stderr
    assert "distmon_gpu_utilization_ratio{" in text and "distmon_alert{" in text


class Prometheus:
    """The shipped prometheus.yml pointed at `target`, scraping and evaluating every second."""

    def __init__(self, tmp: Path, target: str) -> None:
        assert PROMETHEUS is not None
        config = (CONFIGS / "prometheus.yml").read_text()
        config = config.replace("127.0.0.1:9464", target).replace("15s", "1s")
        config = config.replace("- distmon-rules.yml", f"- {CONFIGS / 'distmon-rules.yml'}")
        (tmp / "prometheus.yml").write_text(config)
        self.port = free_port()
        self.log = (tmp / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--web.enable-lifecycle"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, cwd=tmp,
        )  # fmt: skip

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)["data"]
        except OSError:  # not listening yet
            assert self.proc.poll() is None, f"prometheus exited {self.proc.returncode}"
            return None

    def query(self, promql: str) -> list[dict[str, Any]]:
        data = self.api("query", query=promql)
        return list(data["result"]) if data else []

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    write_job(logs, "mnist", [1.0 / (i + 1) for i in range(30)], status="running")
    write_job(logs, "nan", [1.0, math.nan], status="running")
    plain = write_job(logs, "hostile", [0.25, 0.125])
    os.rename(plain, os.path.join(os.fsencode(logs), HOSTILE))
    return logs


@pytest.fixture
def served(tmp_path: Path, logdir: Path) -> Iterator[Serve]:
    serve = Serve(tmp_path, ["--metrics", "0", "--simulate-gpus", "2", "--refresh", "0.5",
                             str(logdir)])  # fmt: skip
    yield serve
    assert serve.stop() == 0, serve.stderr()


@pytest.mark.skipif(PROMETHEUS is None, reason=f"no prometheus: {INSTALL}")
def test_a_real_prometheus_scrapes_serve_and_answers_promql(tmp_path: Path, served: Serve) -> None:
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{served.port()}")
    try:
        # The Grafana-ready query of docs/serve.md: a job's loss.
        loss = wait_until(lambda: prometheus.query('distmon_scalar{job="mnist", tag="loss"}'))
        (series,) = loss
        assert series["metric"]["run"] == "mnist/train"
        assert float(series["value"][1]) == pytest.approx(1.0 / 30)
        (target,) = prometheus.api("targets")["activeTargets"]
        assert target["health"] == "up" and target["lastError"] == ""
        # The hostile name arrives whole, escaped: the newline and the backslash visibly (so
        # that no escape reads like a name's own text), the undecodable byte as distcore's one form.
        name = label_text(os.fsdecode(HOSTILE))
        hostile = wait_until(lambda: prometheus.query('distmon_scalar{job=~"(?s)we.*"}'))
        assert [s["metric"]["job"] for s in hostile] == [name]
        assert name == 'we"ird\\\\job\\nname\\xff'
        # This machine's GPUs, one series each, told apart by index and UUID.
        gpus = prometheus.query('distmon_gpu_utilization_ratio{source="local"}')
        assert sorted((g["metric"]["gpu"], g["metric"]["uuid"]) for g in gpus) == [
            ("0", "GPU-simulated-0000"), ("1", "GPU-simulated-0001")]  # fmt: skip
        # The shipped rules run on what distmon exports: the NaN loss fires DistmonJobDiverged.
        def firing() -> list[str]:
            alerts = (prometheus.api("alerts") or {}).get("alerts", [])
            diverged = [a for a in alerts if a["labels"]["alertname"] == "DistmonJobDiverged"]
            return [a["labels"]["job"] for a in diverged if a["state"] == "firing"]

        assert wait_until(firing) == ["nan"]
    finally:
        prometheus.close()
