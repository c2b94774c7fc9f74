"""Many ssh hosts from one machine: 100 `Host` aliases of one loopback sshd (its default
MaxStartups 10:30:100, as a new user's server has), one small run each, measured as a user meets
them:

- `distmon --once --json` over the 100 `hNNN:PATH` sources: wall time and how many runs it lists;
  the anchor, in the same run and alternating with it: the same 100 logdirs read locally.
- the dashboard (the real Textual app, headless): seconds until its runs table lists all 100,
  then the CPU it uses between refreshes over a window (this process and its ssh children, in %
  of one core; the sshd side, the "remote hosts'" share, is shown apart). Anchor: the same
  dashboard over the 100 local logdirs.
- `distmon --serve --metrics` (a real process): seconds until /metrics counts 100 jobs, and
  the same CPU shares between refreshes; anchor: the same over the local logdirs.

Targets (a fleet): all listed within 10 s in both, at most 5% of a core between refreshes.

First, whose CPU a handshake costs (`--handshakes N`, 0 to skip): N logins one after another
(`ssh HOST true`, no ControlMaster) per key exchange (ssh's default, sntrup761x25519,
curve25519, and `^curve25519-sha256`: the default list with curve25519 first), the ssh client's
CPU and the sshd side's, per login. On 100 real hosts the sshd side runs on 100 machines; the
client side all runs here, so the client's figure is the one a 100-host distmon pays.

The sessions' shell reads the rc files of an empty $HOME by default (`--rc clean`): on 100 real
hosts each login runs its own rc files on its own CPU, while 100 aliases of this machine would
all run this account's (here `pyenv init`, which waits on one shared lock: ~10 s a login on a
loaded 2-core machine). `--rc account` measures that case too.

`--idle-only` measures the dashboard over ssh only, `--rounds` times (no handshake table, no
`--once`, no `--serve`, no anchor): for before/after runs of two checkouts, alternating, with
PYTHONPATH naming the one under test.

The distmon processes (`--once`, `--serve`) run as a user's install does, from byte-code caches
(bench/_installed.py); the in-process dashboard is measured after its imports.

Run: .venv/bin/python bench/remote_hosts.py [--hosts 100] [--rounds 3] [--window 20] [--rc clean]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' server fixtures
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _installed as installed
import psutil

from tests.kit.sshd import HOST_ALIAS, Sshd
from tests.kit.writers import scalar_records

TARGET_SECONDS = 10.0
TARGET_CORE = 0.05


def aliases_config(sshd: Sshd, hosts: int, kex: str | None = None) -> Path:
    """The sshd's client config with `hosts` more aliases of the same server (and, where
    given, the user's choice of key exchange in each)."""
    block = sshd.config.read_text()
    if kex:
        block = block.replace("  LogLevel ERROR\n", f"  LogLevel ERROR\n  KexAlgorithms {kex}\n")
    extra = "".join(block.replace(f"Host {HOST_ALIAS}\n", f"Host h{i:03d}\n", 1)
                     for i in range(hosts))  # fmt: skip
    path = sshd.root / "hosts_config"
    path.write_text(block + extra)
    return path


def make_logdirs(root: Path, hosts: int) -> list[Path]:
    dirs = []
    for i in range(hosts):
        run = root / f"h{i:03d}" / "run"
        run.mkdir(parents=True)
        (run / "events.out.tfevents.1.bench").write_bytes(
            scalar_records("loss", [(s, 1.0 / (s + 1)) for s in range(20)])
        )
        dirs.append(root / f"h{i:03d}")
    return dirs


def distmon_argv() -> list[str]:
    return [sys.executable, "-m", "distmon.cli"]


def once(argv: list[str], sshd: Sshd) -> tuple[float, int, int, float, float]:
    """(seconds, runs listed, errors, CPU seconds of distmon and its ssh clients, CPU seconds
    of the sshd side) of one `distmon --once --json`."""
    before, far = resource.getrusage(resource.RUSAGE_CHILDREN), sshd_seconds(sshd)
    t0 = time.perf_counter()
    done = subprocess.run(
        [*distmon_argv(), "--once", "--json", "--no-gpu", *argv],
        capture_output=True, text=True, timeout=600, env=installed.user_env(),
    )  # fmt: skip
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    doc = json.loads(done.stdout) if done.stdout.strip() else {"runs": [], "errors": []}
    return took, len(doc["runs"]), len(doc["errors"]), cpu, sshd_seconds(sshd) - far


def cpu_seconds(me: psutil.Process) -> tuple[float, float]:
    """(this process, its children: reaped and live, i.e. the ssh masters)."""
    t = me.cpu_times()
    children = t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
            children += c.user + c.system
        except psutil.NoSuchProcess:
            pass
    return t.user + t.system, children


def sshd_seconds(sshd: Sshd) -> float:
    assert sshd.process is not None
    total = 0.0
    listener = psutil.Process(sshd.process.pid)
    for proc in (listener, *listener.children(recursive=True)):
        try:
            c = proc.cpu_times()
            total += c.user + c.system + c.children_user + c.children_system
        except psutil.NoSuchProcess:
            pass
    return total


async def dashboard(
    argv: list[str], expected: int, window: float, sshd: Sshd
) -> tuple[float, float, float, float]:
    """(seconds until the runs table lists `expected` runs, share of a core between refreshes:
    distmon's process, its ssh clients, the sshd side) for the real app over `argv`."""
    from distmon.app import DistmonApp
    from distmon.arguments import parse_options
    from distmon.producers import make_producers
    from distmon.widgets.runs import RunsTable

    options = parse_options(argv)
    app = DistmonApp(options, producers=lambda: make_producers(options))
    me = psutil.Process()
    t0 = time.perf_counter()
    listed = float("nan")
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(RunsTable)
        deadline = t0 + 180
        while time.perf_counter() < deadline:
            if len(table._rows) >= expected:
                listed = time.perf_counter() - t0
                break
            await pilot.pause(0.05)
        await pilot.pause(3.0)  # the first catch-up reads settle
        cpu0, far0, w0 = cpu_seconds(me), sshd_seconds(sshd), time.perf_counter()
        await pilot.pause(window)
        cpu1, far1, w1 = cpu_seconds(me), sshd_seconds(sshd), time.perf_counter()
    span = w1 - w0
    own, clients = (cpu1[0] - cpu0[0]) / span, (cpu1[1] - cpu0[1]) / span
    return listed, own, clients, (far1 - far0) / span


KEXES: tuple[str | None, ...] = (
    None, "sntrup761x25519-sha512@openssh.com", "curve25519-sha256", "^curve25519-sha256",
)


def handshakes(sshd: Sshd, kex: str | None, count: int) -> tuple[float, float, float, str]:
    """(client CPU ms, sshd CPU ms, wall ms, the exchange used) per login, medians over
    `count` sequential logins."""
    config = aliases_config(sshd, 0, kex)
    client, server, wall, used = [], [], [], "?"
    for i in range(count):
        before, far, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), sshd_seconds(sshd), \
            time.perf_counter()
        done = subprocess.run(
            ["ssh", "-F", str(config), "-o", "ControlMaster=no", "-o", "ControlPath=none",
             *(["-v"] if i == 0 else []), HOST_ALIAS, "true"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        took = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"ssh failed ({kex}): {done.stderr.strip()[-300:]}")
        if i == 0:  # -v's "kex: algorithm: NAME" names what was negotiated
            found = [ln.split()[-1] for ln in done.stderr.splitlines() if "kex: algorithm:" in ln]
            used = found[0] if found else "?"
            continue  # the first also warms the page cache: not counted
        client.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        server.append(sshd_seconds(sshd) - far)
        wall.append(took)
    ms = [statistics.median(v) * 1000 for v in (client, server, wall)]
    return ms[0], ms[1], ms[2], used


def serve_idle(argv: list[str], expected: int, window: float, sshd: Sshd) -> tuple[float, ...]:
    """(seconds until /metrics counts `expected` jobs, share of a core between refreshes:
    distmon's process, its ssh clients, the sshd side) of a real `distmon --serve --metrics`."""
    import re
    import urllib.request

    with tempfile.TemporaryFile() as err:
        proc = psutil.Popen([*distmon_argv(), "--serve", "--metrics", "0", "--no-gpu", *argv],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                            env=installed.user_env())
        try:
            t0, deadline, jobs = time.perf_counter(), time.perf_counter() + 180, 0.0
            port = None
            while time.perf_counter() < deadline and jobs < expected:
                time.sleep(0.1)
                if port is None:
                    err.seek(0)
                    found = re.search(rb"127\.0\.0\.1:(\d+)/metrics", err.read())
                    port = found.group(1).decode() if found else None
                    continue
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as answer:
                    text = answer.read().decode()
                count = re.search(r"^distmon_jobs (\S+)$", text, re.M)
                jobs = float(count.group(1)) if count else 0.0
            listed = time.perf_counter() - t0 if jobs >= expected else float("nan")
            time.sleep(3.0)  # the first catch-up reads settle

            def both() -> tuple[float, float]:
                t = proc.cpu_times()
                kids = 0.0
                for child in proc.children(recursive=True):
                    try:
                        c = child.cpu_times()
                        kids += c.user + c.system
                    except psutil.NoSuchProcess:
                        pass
                return t.user + t.system, kids

            a, far0, w0 = both(), sshd_seconds(sshd), time.perf_counter()
            time.sleep(window)
            b, far1, w1 = both(), sshd_seconds(sshd), time.perf_counter()
        finally:
            proc.terminate()
            proc.wait(60)
    span = w1 - w0
    return listed, (b[0] - a[0]) / span, (b[1] - a[1]) / span, (far1 - far0) / span


def idle_rounds(sshd: Sshd, tmp: Path, args: argparse.Namespace) -> None:
    """The dashboard over the ssh hosts, `args.rounds` times: when all are listed, and the
    idle share split into distmon's process, its ssh clients and the sshd side."""
    import distcore

    config = aliases_config(sshd, args.hosts, args.kex)
    dirs = make_logdirs(tmp / "logs", args.hosts)
    argv = ["--no-gpu", "--ssh-config", str(config)]
    argv += [f"h{i:03d}:{d}" for i, d in enumerate(dirs)]
    print(f"{args.hosts} ssh hosts, key exchange {args.kex or 'ssh default'}, distcore from"
          f" {Path(distcore.__file__).parents[1]}; load average {os.getloadavg()[0]:.1f}")
    for round_ in range(args.rounds):
        listed, own, clients, far = asyncio.run(dashboard(argv, args.hosts, args.window, sshd))
        core = (own + clients) * 100
        print(f"  round {round_ + 1}: all listed after {listed:5.2f} s; {core:4.1f}%"
              f" of a core between refreshes (distmon {own * 100:.1f}%, its ssh clients"
              f" {clients * 100:.1f}%; sshd side {far * 100:.1f}%); load average"
              f" {os.getloadavg()[0]:.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="alternating --once rounds")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of CPU measured")
    parser.add_argument(
        "--kex",
        default=None,
        metavar="ALGORITHMS",
        help="KexAlgorithms in each Host block (e.g. ^curve25519-sha256: OpenSSH 9's default"
        " post-quantum sntrup761 exchange costs 90-150 ms of client CPU a login here, curve25519"
        " 11-17 ms; see --only-handshakes)",
    )
    parser.add_argument(
        "--handshakes", type=int, default=20,
        help="sequential logins per key exchange in the handshake-cost table (0: skip it)",
    )  # fmt: skip
    parser.add_argument(
        "--only-handshakes", action="store_true", help="the handshake table only",
    )  # fmt: skip
    parser.add_argument(
        "--rc", choices=("clean", "account"), default="clean",
        help="the sessions' rc files: an empty $HOME's (default) or this account's",
    )  # fmt: skip
    parser.add_argument(
        "--idle-only", action="store_true",
        help="only the dashboard over ssh, --rounds times: listed after, idle share (A/B runs)",
    )  # fmt: skip
    args = parser.parse_args()
    installed.warm_caches()
    with tempfile.TemporaryDirectory(prefix="distmon-bench-hosts-") as name:
        tmp = Path(name)
        (tmp / "sshd").mkdir()
        (tmp / "home").mkdir()
        sshd = Sshd(tmp / "sshd", home=tmp / "home" if args.rc == "clean" else None)
        sshd.start()
        try:
            if args.idle_only:
                idle_rounds(sshd, tmp, args)
                return
            if args.handshakes > 0:
                print(f"one login's CPU (median of {args.handshakes - 1}, the first not counted;"
                      f" load average {os.getloadavg()[0]:.1f}):")  # fmt: skip
                for kex in KEXES:
                    c_ms, s_ms, w_ms, used = handshakes(sshd, kex, args.handshakes)
                    print(f"  KexAlgorithms {kex or '(ssh default)':<36} -> {used:<36}"
                          f" client {c_ms:5.1f} ms, sshd side {s_ms:5.1f} ms, wall {w_ms:5.1f} ms")
            if args.only_handshakes:
                return
            config = aliases_config(sshd, args.hosts, args.kex)
            dirs = make_logdirs(tmp / "logs", args.hosts)
            remote = ["--ssh-config", str(config)]
            remote += [f"h{i:03d}:{d}" for i, d in enumerate(dirs)]
            local = [str(d) for d in dirs]
            print(
                f"{args.hosts} ssh hosts (aliases of one loopback sshd, {args.rc} rc files,"
                f" key exchange {args.kex or 'ssh default'}),"
                f" one small run each; load average {os.getloadavg()[0]:.1f} on"
                f" {os.cpu_count()} cores"
            )
            times: dict[str, list[float]] = {"ssh": [], "local": []}
            for round_ in range(args.rounds):
                order = [("ssh", remote), ("local", local)]
                for label, argv in order if round_ % 2 == 0 else order[::-1]:
                    took, runs, errors, cpu, far = once(argv, sshd)
                    times[label].append(took)
                    print(f"  --once {label:<5} round {round_ + 1}: {took:5.2f} s, "
                          f"{runs} runs listed, {errors} errors; CPU: distmon and its ssh"
                          f" clients {cpu:.2f} s, sshd side {far:.2f} s")  # fmt: skip
            ssh_t, local_t = statistics.median(times["ssh"]), statistics.median(times["local"])
            verdict = "ok" if ssh_t <= TARGET_SECONDS else "MISSED"
            print(
                f"--once over ssh: median {ssh_t:.2f} s ({ssh_t / local_t:.1f}x the local"
                f" anchor's {local_t:.2f} s); target <= {TARGET_SECONDS:g} s: {verdict}"
            )
            for label, argv in (("ssh", remote), ("local", local)):
                listed, own, clients, far = asyncio.run(
                    dashboard(["--no-gpu", *argv], args.hosts, args.window, sshd)
                )
                core = own + clients
                print(f"dashboard {label:<5}: all {args.hosts} listed after {listed:5.2f} s;"
                      f" {core * 100:5.1f}% of a core between refreshes (distmon"
                      f" {own * 100:.1f}%, its ssh clients {clients * 100:.1f}%;"
                      f" sshd side {far * 100:.1f}%)")  # fmt: skip
                if label == "ssh":
                    ok = listed <= TARGET_SECONDS and core <= TARGET_CORE
                    print(f"  targets <= {TARGET_SECONDS:g} s and <= {TARGET_CORE:.0%} of a"
                          f" core: {'ok' if ok else 'MISSED'}")  # fmt: skip
            for label, argv in (("ssh", remote), ("local", local)):
                listed, own, clients, far = serve_idle(argv, args.hosts, args.window, sshd)
                print(f"--serve   {label:<5}: {args.hosts} jobs in /metrics after {listed:5.2f} s;"
                      f" {(own + clients) * 100:5.1f}% of a core between refreshes (distmon"
                      f" {own * 100:.1f}%, its ssh clients {clients * 100:.1f}%;"
                      f" sshd side {far * 100:.1f}%)")  # fmt: skip
        finally:
            sshd.stop()


if __name__ == "__main__":
    main()
