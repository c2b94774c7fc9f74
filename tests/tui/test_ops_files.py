"""The admin files of sample_configs/ops, each checked by the tool that reads it: the systemd
unit by systemd-analyze, the Slurm prolog and epilog run by bash on a temporary map directory,
the Alertmanager routes by amtool, and every query of the Grafana dashboard by a real
Prometheus (started here from a temporary directory) scraping a real `distmon --serve
--metrics` over event files written by tensorboardX."""

from __future__ import annotations

import functools
import json
import math
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the test extras

from tests.kit.wait import wait_until
from tests.tui.test_serve import ROOT, Serve, sample, scrape
from tests.tui.test_serve_prometheus import INSTALL, PROMETHEUS, Prometheus

OPS = ROOT / "sample_configs" / "ops"
RULES = ROOT / "sample_configs" / "prometheus"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
AMTOOL = shutil.which("amtool")


def run(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL, **kw)  # fmt: skip


# --- systemd ----------------------------------------------------------------------------------


def exec_start() -> list[str]:
    text = (OPS / "distmon.service").read_text().replace("\\\n", " ")
    (line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def unit_here(tmp: Path) -> Path:
    """The unit with its ExecStart pointing at an executable of this machine."""
    unit = tmp / "distmon.service"
    text = (OPS / "distmon.service").read_text()
    unit.write_text(text.replace(exec_start()[0], sys.executable))
    return unit


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="no systemd-analyze")
def test_the_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    unit = unit_here(tmp_path)
    done = run([SYSTEMD_ANALYZE, "verify", str(unit)])
    # A misspelt key is only a warning: none is allowed.
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr
    security = run([SYSTEMD_ANALYZE, "security", "--offline=yes", str(unit)])
    level = re.search(r"Overall exposure level for distmon\.service: ([0-9.]+)", security.stdout)
    assert level is not None, security.stdout + security.stderr
    assert float(level.group(1)) <= 2.0, security.stdout  # systemd's own "OK" band
    text = unit.read_text()
    for key in ("DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict",
                "LoadCredential=notify-url:"):  # fmt: skip
        assert f"\n{key}" in text


def test_the_units_command_is_one_distmon_accepts(tmp_path: Path) -> None:
    from distmon.arguments import parse_options
    from distmon.flags import build_parser

    args = exec_start()
    known = {o for a in build_parser()._actions for o in a.option_strings}
    unknown = [a for a in args[1:] if a.startswith("--") and a not in known]
    if unknown == ["--notify-file"]:
        pytest.skip("this distmon has no --notify-file yet")
    credential = tmp_path / "notify-url"
    credential.write_text("https://hooks.example.com/T0/B0/secret\n")
    credential.chmod(0o400)  # as systemd writes a credential: its service's user reads it alone
    options = parse_options([a.replace("%d", str(tmp_path)) for a in args[1:]])
    assert options.serve and options.metrics == ("127.0.0.1", 9464)
    assert options.notify == "https://hooks.example.com/T0/B0/secret"
    assert options.notify_source == f"--notify-file {credential}"


# --- Slurm prolog and epilog ------------------------------------------------------------------

Step = tuple[str, str, str]  # script, SLURM_JOB_ID, SLURM_JOB_GPUS


def gpu_jobs(where: Path, script: str, job: str, gpus: str = "") -> None:
    env = {"PATH": os.environ["PATH"], "DCGM_JOB_MAP_DIR": str(where),
           "SLURM_JOB_ID": job, "SLURM_JOB_GPUS": gpus}  # fmt: skip
    done = run(["bash", str(OPS / "slurm" / f"{script}-gpu-jobs.sh")], env=env)
    assert done.returncode == 0, done.stderr  # a failing prolog would drain the node


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([("prolog", "7", "0,1")], {"0": ["7"], "1": ["7"]}),
        ([("prolog", "7", "0,1"), ("prolog", "8", "1"), ("epilog", "7", "")], {"1": ["8"]}),
        ([("prolog", "7", "2"), ("prolog", "7", "2")], {"2": ["7"]}),  # a prolog run twice
        ([("prolog", "7", "0"), ("epilog", "7", "0")], {}),  # an idle GPU has no file
        ([("prolog", "9", "")], {}),  # a CPU-only job
        # Nothing from the environment becomes a path or a line unless it is a number.
        ([("prolog", "7", "../../etc/x,1"), ("prolog", "1;rm", "0")], {"1": ["7"]}),
        ([("prolog", "7", "0"), ("epilog", "../7", ""), ("epilog", "70", "")], {"0": ["7"]}),
    ],
)
def test_prolog_and_epilog_keep_dcgms_gpu_map(
    tmp_path: Path, steps: list[Step], expected: dict[str, list[str]]
) -> None:
    where = tmp_path / "map"
    for step in steps:
        gpu_jobs(where, *step)
    found = {p.name: p.read_text().split() for p in where.glob("*")} if where.exists() else {}
    found.pop(".lock", None)
    assert found == expected
    assert sorted(tmp_path.iterdir()) == ([where] if where.exists() else [])


as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the scripts run as root under Slurm, and planting another "
    "account's file (chown) takes root: run the suite as root to check them")


def less_privileged() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        run(["useradd", "--system", "--no-create-home", "nobody"])
        return pwd.getpwnam("nobody")


@pytest.fixture
def secret(tmp_path: Path) -> Iterator[Path]:
    """Another account's private file: the scripts (root) must not write, empty or chmod it."""
    path = tmp_path / "secret"
    path.write_text("7\n8\n")  # job ids, so the epilog would act on it
    user = less_privileged()
    os.chown(path, user.pw_uid, user.pw_gid)
    path.chmod(0o600)
    before = path.stat()
    yield path
    after = path.stat()
    assert path.read_text() == "7\n8\n"
    assert (after.st_mode, after.st_uid, after.st_nlink) == (before.st_mode, before.st_uid, 1)


def listing(where: Path) -> dict[str, str]:
    return {p.name: os.readlink(p) if p.is_symlink() else p.read_text() for p in where.iterdir()}


@as_root
def test_the_scripts_follow_no_link_in_the_map(tmp_path: Path, secret: Path) -> None:
    where = tmp_path / "map"
    where.mkdir(mode=0o755)
    for name in (".lock", "0", "1.tmp"):  # the old lock, a GPU's file, the old temporary
        (where / name).symlink_to(secret)
    gpu_jobs(where, "prolog", "7", "0,1")
    gpu_jobs(where, "prolog", "8", "1")
    gpu_jobs(where, "epilog", "7")
    links = {name: str(secret) for name in (".lock", "0", "1.tmp")}
    assert listing(where) == {**links, "1": "8\n"}


def others_write(where: Path) -> Path:
    where.mkdir(mode=0o777)
    where.chmod(0o777)
    return where


def group_writes(where: Path) -> Path:
    where.mkdir()
    where.chmod(0o775)
    return where


def not_roots(where: Path) -> Path:
    where.mkdir(mode=0o755)
    user = less_privileged()
    os.chown(where, user.pw_uid, user.pw_gid)
    return where


def through_a_link(where: Path) -> Path:
    (where.parent / "elsewhere").mkdir(mode=0o755)
    where.symlink_to(where.parent / "elsewhere")
    return where


@as_root
@pytest.mark.parametrize("make", [others_write, group_writes, not_roots, through_a_link])
def test_a_map_directory_others_can_write_is_left_alone(
    tmp_path: Path, secret: Path, make: Callable[[Path], Path]
) -> None:
    where = make(tmp_path / "map")
    (where / "0").write_text("7\n")
    (where / "1").symlink_to(secret)
    gpu_jobs(where, "prolog", "7", "0,1,2")
    gpu_jobs(where, "epilog", "7")
    assert listing(where) == {"0": "7\n", "1": str(secret)}


# --- Alertmanager -----------------------------------------------------------------------------

ALERTS = [r["alert"] for g in yaml.safe_load((RULES / "distmon-rules.yml").read_text())["groups"]
          for r in g["rules"] if "alert" in r]  # fmt: skip
needs_amtool = pytest.mark.skipif(
    AMTOOL is None, reason="no amtool: apt-get install prometheus-alertmanager (.ci/run does it)"
)


@needs_amtool
def test_the_alertmanager_config_passes_amtool() -> None:
    assert AMTOOL is not None
    done = run([AMTOOL, "check-config", str(OPS / "alertmanager.yml")])
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@needs_amtool
@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["severity=critical", "alertname=DistmonAgentDied", "job=j"], "on-call"),
        (["severity=critical", "alertname=DistmonJobFailed"], "on-call"),
        (["severity=warning", "alertname=DistmonSchedulerUnreachable"], "team-chat"),
        (["severity=info", "alertname=DistmonSeriesDropped"], "null"),
        (["alertname=SomethingElse"], "team-chat"),
    ],
)
def test_each_severity_has_its_route(labels: list[str], receiver: str) -> None:
    assert AMTOOL is not None
    config = f"--config.file={OPS / 'alertmanager.yml'}"
    done = run([AMTOOL, "config", "routes", "test", config, *labels])
    assert done.returncode == 0 and done.stdout.split() == [receiver], done.stdout + done.stderr


def test_the_routes_name_the_shipped_alerts_and_severities() -> None:
    """What amtool cannot know: the inhibitions and routes match the rules beside them."""
    config = yaml.safe_load((OPS / "alertmanager.yml").read_text())
    rules = [r for g in yaml.safe_load((RULES / "distmon-rules.yml").read_text())["groups"]
             for r in g["rules"] if "alert" in r]  # fmt: skip
    routed = {m for r in config["route"]["routes"] for m in r["matchers"]}
    assert {f'severity="{r["labels"]["severity"]}"' for r in rules} <= routed
    for inhibit in config["inhibit_rules"]:
        for matcher in inhibit["source_matchers"] + inhibit["target_matchers"]:
            name = re.fullmatch(r'alertname(=~?)"(.*)"', matcher)
            if name is not None:
                assert [a for a in ALERTS if re.fullmatch(name.group(2), a)], matcher


def test_every_shipped_alert_has_a_promtool_unit_test() -> None:
    tests = yaml.safe_load((RULES / "distmon-rules.test.yml").read_text())["tests"]
    tested = {t["alertname"] for case in tests for t in case.get("alert_rule_test", [])}
    assert set(ALERTS) <= tested


# --- Grafana, against a real Prometheus -------------------------------------------------------


def write_run(logdir: Path, name: str, tags: dict[str, Sequence[float]],
              run_json: dict[str, Any] | None = None) -> None:  # fmt: skip
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(logdir / name / "train"))
    start = time.time() - 60
    for tag, values in tags.items():
        for step, value in enumerate(values):
            writer.add_scalar(tag, value, step, walltime=start + step)
    writer.close()
    if run_json is not None:
        (logdir / name / "run.json").write_text(json.dumps(run_json))


def write_system(logdir: Path, job: str, part: str, hparams: dict[str, Any]) -> None:
    """`<job>/<part>` as distagent's recorder writes it: its host (and worker) as hparams, the
    host's CPU and one GPU's utilization."""
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams as hparams_summary

    from distcore import names

    writer = SummaryWriter(str(logdir / job / part))
    experiment, session_start, _ = hparams_summary(hparams, {})
    writer.file_writer.add_summary(experiment)
    writer.file_writer.add_summary(session_start)
    now = time.time()
    for step in range(3):
        wall = now - (2 - step) * 30.0
        writer.add_scalar(names.HOST_CPU_PERCENT, 50.0, step, walltime=wall)
        writer.add_scalar(names.gpu_tag(0, "utilization"), 80.0, step, walltime=wall)
    writer.close()


@pytest.fixture
def ops_logdir(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    losses = [1.0 / (i + 1) for i in range(40)]
    write_run(logs, "keras", {"loss": losses, "epoch_loss": losses[::4],
                              "perf/input_wait_fraction": [0.3] * 40},
              {"status": "running", "scheduler": {"kind": "slurm", "job_id": "4242",
                                                  "partition": "gpu"}})  # fmt: skip
    write_run(logs, "nan", {"loss": [1.0, math.nan]}, {"status": "running"})
    write_run(logs, "plain", {"loss": [0.5, 0.25]})
    # Two jobs' samples from one host, and two workers of one job on one host: each a line of
    # its own in the host and GPU panels.
    write_system(logs, "keras", "system", {"host": "gpuhost"})
    write_system(logs, "plain", "system", {"host": "gpuhost"})
    for worker in (0, 1):
        write_system(logs, "nan", f"system/worker-{worker}", {"host": "gpuhost", "worker": worker})
    return logs


def no_slurm(tmp: Path) -> dict[str, str]:
    """distmon's environment with no Slurm command on PATH: the info series then holds what
    run.json says, whatever this machine's Slurm client does without a controller
    (tests/agent/test_slurm.py asks a real one)."""
    return {**os.environ, "PATH": str(tmp)}


@pytest.fixture
def ops_served(tmp_path: Path, ops_logdir: Path) -> Iterator[Serve]:
    serve = Serve(tmp_path, ["--metrics", "0", "--simulate-gpus", "2", "--refresh", "0.5",
                             str(ops_logdir)], env=no_slurm(tmp_path))  # fmt: skip
    yield serve
    assert serve.stop() == 0, serve.stderr()


def panel_targets() -> list[tuple[str, str, str]]:
    """(panel title, expr, legend) of every query of the dashboard."""
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    return [(p["title"], t["expr"], t.get("legendFormat", ""))
            for p in dashboard["panels"] for t in p["targets"]]  # fmt: skip


def grafana_expr(expr: str) -> str:
    """What Grafana sends for the dashboard's variables: every job, a rate window of 4 scrapes
    (Prometheus here scrapes every second)."""
    return expr.replace("$job", ".*").replace("$__rate_interval", "4s")


def legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)


@pytest.mark.skipif(PROMETHEUS is None, reason=f"no prometheus: {INSTALL}")
def test_every_dashboard_query_returns_data(tmp_path: Path, ops_served: Serve) -> None:
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{ops_served.port()}")
    try:
        variable = wait_until(
            lambda: prometheus.api("label/job/values", **{"match[]": "distmon_job_status"}) or []
        )
        assert {"keras", "nan", "plain"} <= set(variable)
        for title, expr, template in panel_targets():
            found = wait_until(functools.partial(prometheus.query, grafana_expr(expr)))
            if template:  # one line, one legend: two lines named alike cannot be told apart
                names = [legend(template, s["metric"]) for s in found]
                assert len(names) == len(set(names)), (title, names)
        # The info series joins: each loss with its Slurm job.
        joined = prometheus.query(
            'distmon_scalar{tag="loss"} * on (job) group_left (slurm_job_id) distmon_job_info'
        )
        assert {(s["metric"]["job"], s["metric"].get("slurm_job_id")) for s in joined} == {
            ("keras", "4242"), ("nan", None), ("plain", None)}  # fmt: skip
    finally:
        prometheus.close()


def test_max_series_is_exact_on_the_wire(tmp_path: Path, ops_logdir: Path) -> None:
    serve = Serve(tmp_path, ["--metrics", "0", "--simulate-gpus", "2", "--max-series", "50",
                             str(ops_logdir)], env=no_slurm(tmp_path))  # fmt: skip
    try:
        port = serve.port()

        def every_job_seen() -> str:
            text = scrape(port)
            return text if sample(text, "distmon_jobs") == 3 else ""

        text = wait_until(every_job_seen)
        lines = [x for x in text.splitlines() if x and not x.startswith("#")]
        assert len(lines) == 50, text
        dropped = sample(text, "distmon_series_dropped")
        assert dropped is not None and dropped > 0
    finally:
        assert serve.stop() == 0, serve.stderr()
