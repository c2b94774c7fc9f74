#!/usr/bin/env bash
# distmon on real NVIDIA GPUs, for a machine with no TensorFlow (the lent device machine).
#
#   bash bench/gpu_check.sh            # from the repository root; figures under $OUT when set
#
# Four checks, then one PASS/FAIL line each and a summary (exit 0 only when all pass):
#   1. nvml     `distmon --once --json`'s GPU fields (NVML) against `nvidia-smi --query-gpu` on
#               the same GPUs, matched by UUID.
#   2. smi      distcore.remote.nvidia_smi (what distmon runs on ssh hosts) parsing the real
#               binary's output of its own query, against the same GPUs.
#   3. torch    a PyTorch job on GPU 0 writing TensorBoard events (torch.utils.tensorboard),
#               once with a starved DataLoader (sleeps in __getitem__) and once fed, each
#               watched by `distmon --once --json` while it runs: "input-bound suspected" must
#               be raised for the starved job only.
#   4. gpm      NVML GPM through distmon (SM activity, occupancy, tensor-core activity, DRAM
#               bandwidth) against `nvidia-smi dmon --gpm-metrics` on GPU 0, under a bf16
#               matmul loop (tensor activity high) and a device-to-device copy loop (util near
#               100 %, tensor activity near 0: busy but not computing). On a GPU without GPM
#               (before Hopper) it checks that distmon says so, with NVML's reason, and shows
#               null rather than 0.
# Takes about 3 minutes (each job trains for JOB_SECONDS, default 25 s; each GPM load runs
# LOAD_SECONDS, default 14 s); bounded at 6 minutes.
#
# Needs: nvidia-smi and an NVIDIA driver; python3 (PYTHON=...) with torch (CUDA), nvidia-ml-py,
# numpy, psutil, protobuf and tensorboard (the device image has them), and two small wheels it
# lacks: google-crc32c and watchdog. distmon itself is not installed: it runs from this checkout
# (PYTHONPATH=shared:tui; distmon --once imports no Textual). Missing wheels are installed with
# pip --no-index from .whl/ in the repository root, when there; make them on a machine with
# internet access (Python 3.12, x86-64), ignore .whl/ in git and carry it to the device:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl google-crc32c watchdog
set -uo pipefail
export LC_ALL=C PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
PY=${PYTHON:-python3}
JOB_SECONDS=${JOB_SECONDS:-25}
LOAD_SECONDS=${LOAD_SECONDS:-14}
FIGS=${OUT:-}
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
if [ -z "$FIGS" ]; then FIGS=$WORK/out; fi
mkdir -p "$FIGS"
LOG=$FIGS/gpu_check.log
: >"$LOG"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK/logs"' EXIT
# Hard bound on the whole script, whatever hangs (a wedged driver, a stuck import).
# Its output goes nowhere, and it ends its sleep when ended: no pipe held open after exit.
( trap 'kill $! 2>/dev/null; exit 0' TERM; sleep 360 & wait $!
  echo "gpu_check: 360 s bound reached, stopping" >>"$LOG"; kill -TERM $$ ) >/dev/null 2>&1 &
WATCHDOG=$!
trap 'echo; echo "SUMMARY: FAIL (stopped at the 360 s bound; see $LOG)"; exit 1' TERM

declare -a RESULTS=()
note() { echo "$*" | tee -a "$LOG"; }
result() { RESULTS+=("$1 $2: $3"); note "$1 $2: $3"; }

note "gpu_check: $(date -u +%FT%TZ) repo=$REPO python=$PY work=$WORK figures=$FIGS"

# --- preflight --------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
    result FAIL preflight "nvidia-smi not found: this check needs an NVIDIA GPU and its driver"
    printf '\nSUMMARY: FAIL (0 of 1 passed)\n' | tee -a "$LOG"; exit 1
fi
nvidia-smi -L 2>&1 | tee -a "$LOG"
SITE=$WORK/site
missing=$("$PY" - <<'EOF' 2>>"$LOG"
import importlib
need = {"numpy": "numpy", "psutil": "psutil", "google.protobuf": "protobuf",
        "tensorboard": "tensorboard", "google_crc32c": "google-crc32c", "watchdog": "watchdog",
        "pynvml": "nvidia-ml-py", "torch": "torch"}
gone = []
for module, dist in need.items():
    try:
        importlib.import_module(module)
    except Exception:
        gone.append(dist)
print(" ".join(gone))
EOF
)
if [ -n "$missing" ] && ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
    note "installing from .whl/ for: $missing"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
        "$REPO"/.whl/*.whl >>"$LOG" 2>&1 || note "pip install from .whl/ failed (see above)"
fi
export PYTHONPATH=$REPO/shared:$REPO/tui:$SITE${PYTHONPATH:+:$PYTHONPATH}
missing=$("$PY" -c '
import importlib
need = {"numpy": "numpy", "psutil": "psutil", "google.protobuf": "protobuf",
        "tensorboard": "tensorboard", "google_crc32c": "google-crc32c", "watchdog": "watchdog",
        "pynvml": "nvidia-ml-py", "torch": "torch", "distmon.once": "distmon (this checkout)"}
gone = []
for module, dist in need.items():
    try:
        importlib.import_module(module)
    except Exception as err:
        gone.append(f"{dist} ({type(err).__name__}: {err})")
print("; ".join(gone))' 2>>"$LOG")
if [ -n "$missing" ]; then
    result FAIL preflight "missing Python packages: $missing (see this script's header: .whl/)"
    printf '\nSUMMARY: FAIL (0 of 1 passed)\n' | tee -a "$LOG"; exit 1
fi
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>>"$LOG"; then
    result FAIL preflight "torch.cuda.is_available() is False"
    printf '\nSUMMARY: FAIL (0 of 1 passed)\n' | tee -a "$LOG"; exit 1
fi

once_json() {  # distmon --once --json LOGDIR > FILE
    timeout 120 "$PY" -m distmon --once --json "$1" >"$2" 2>>"$LOG"
}

# --- 1 and 2: NVML through distmon, and the remote parser, against nvidia-smi -----------------
mkdir -p "$WORK/empty"
once_json "$WORK/empty" "$FIGS/once_idle.json" || note "distmon --once --json exited $?"
SMI_FIELDS=index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,clocks.sm
nvidia-smi --query-gpu=$SMI_FIELDS --format=csv,noheader,nounits >"$WORK/smi.csv" 2>>"$LOG"
# What distcore.remote.nvidia_smi runs on an ssh host, for ~1.5 s (its -lms loop), here.
REMOTE_CMD=$("$PY" -c 'from distcore.remote.smi_query import command; print(command(500))')
timeout 1.6 bash -c "$REMOTE_CMD" >"$WORK/remote.csv" 2>>"$LOG"
cp "$WORK/smi.csv" "$FIGS/nvidia_smi.csv"
"$PY" - "$FIGS/once_idle.json" "$WORK/smi.csv" "$WORK/remote.csv" "$FIGS/gpu_fields.json" \
    >>"$WORK/checks.txt" 2>>"$LOG" <<'EOF'
import json, sys
from distcore.remote.smi_query import parse_line

once, smi_csv, remote_csv, figures = sys.argv[1:5]

def num(text):
    try:
        return float(text)
    except ValueError:
        return None  # [N/A], [Not Supported]

smi = {}
for line in open(smi_csv):
    cells = [c.strip() for c in line.split(",")]
    if len(cells) == 10 and cells[0].isdigit():
        smi[cells[1]] = {"index": int(cells[0]), "name": cells[2], "memory_total_mib": num(cells[3]),
                         "memory_used_mib": num(cells[4]), "utilization_gpu": num(cells[5]),
                         "temperature_c": num(cells[6]), "power_w": num(cells[7]),
                         "power_limit_w": num(cells[8]), "sm_clock_mhz": num(cells[9])}
try:
    doc = json.load(open(once))
    nvml = {g["uuid"]: g for g in doc["gpus"]["devices"]}
    reason = None if doc["gpus"]["available"] else doc["gpus"].get("reason")
except (OSError, ValueError, KeyError, TypeError) as err:
    doc, nvml, reason = {}, {}, f"distmon --once --json gave no JSON ({err})"
# Allowed differences: the two reads are a moment apart, so moving figures get slack.
TOLERANCE = {"memory_total_mib": 1.0, "memory_used_mib": 512.0, "utilization_gpu": 30.0,
             "temperature_c": 5.0, "power_limit_w": 1.0, "power_w": 60.0}
rows, problems = [], [f"distmon sees no GPU: {reason}"] if reason else []
for uuid, want in smi.items():
    got = nvml.get(uuid)
    if got is None:
        problems.append(f"{uuid}: in nvidia-smi, not in distmon")
        continue
    if got["index"] != want["index"] or got["name"] != want["name"]:
        problems.append(f"{uuid}: index/name {got['index']}/{got['name']} vs "
                        f"{want['index']}/{want['name']}")
    for field, slack in TOLERANCE.items():
        a, b = got.get(field), want[field]
        rows.append({"uuid": uuid, "field": field, "distmon": a, "nvidia_smi": b})
        if b is None:
            continue  # not supported on this GPU: nothing to compare
        if not isinstance(a, (int, float)) or abs(a - b) > slack:
            problems.append(f"GPU {want['index']} {field}: distmon {a} vs nvidia-smi {b}")
extra = set(nvml) - set(smi)
if extra:
    problems.append(f"distmon lists GPUs nvidia-smi does not: {sorted(extra)}")
if not smi:
    problems.append("nvidia-smi --query-gpu printed no GPU")
fields = len({r["field"] for r in rows})
print(("FAIL" if problems else "PASS") + f" nvml: {len(smi)} GPU(s), {fields} fields each vs "
      f"nvidia-smi" + (": " + "; ".join(problems[:6]) if problems else ""))

# The remote parser on the real binary's lines: every line parses, and agrees with NVML.
lines = [l for l in open(remote_csv, errors="replace").read().splitlines() if l.strip()]
parsed = [parse_line(l) for l in lines]
bad = [l for l, p in zip(lines, parsed) if p is None]
remote_problems = [f"unparsed line {l[:120]!r}" for l in bad[:3]]
seen = {p.uuid: p for p in parsed if p is not None}
for uuid, want in smi.items():
    got = seen.get(uuid)
    if got is None:
        remote_problems.append(f"{uuid}: no parsed line")
        continue
    if got.index != want["index"] or got.name != want["name"] \
            or got.memory_total_mib != want["memory_total_mib"]:
        remote_problems.append(f"GPU {want['index']}: parsed {got.index}/{got.name}/"
                               f"{got.memory_total_mib} vs {want}")
    for field in ("utilization_gpu", "memory_used_mib", "temperature_c", "power_w"):
        if want[field] is not None and getattr(got, field) is None:
            remote_problems.append(f"GPU {want['index']} {field}: None, nvidia-smi has {want[field]}")
if not lines:
    remote_problems.append("the remote command printed nothing")
print(("FAIL" if remote_problems else "PASS") + f" smi: {len(lines)} lines of the remote query, "
      f"{len(seen)} GPU(s) parsed" + (": " + "; ".join(remote_problems[:6]) if remote_problems else ""))
json.dump({"compared": rows, "problems": problems, "remote_lines": lines[:20],
           "remote_problems": remote_problems}, open(figures, "w"), indent=1)
EOF

# --- 3: a PyTorch job, starved then fed, watched by distmon ----------------------------------
cat >"$WORK/job.py" <<'EOF'
"""A small PyTorch job on GPU 0 writing TensorBoard events: `loss` every step."""
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.tensorboard import SummaryWriter

logdir, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
SLEEP = 0.02  # per example when starved: a batch of 32 waits 0.64 s for 1-2 ms of compute

class Examples(Dataset):
    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        if mode == "starved":
            time.sleep(SLEEP)  # a slow reader: decoding, a network filesystem ...
        return torch.randn(256), i % 10

device = torch.device("cuda:0")
model = torch.nn.Sequential(torch.nn.Linear(256, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Examples(), batch_size=32, num_workers=0 if mode == "starved" else 2)
writer = SummaryWriter(logdir, flush_secs=1)
heavy = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
end, step = time.monotonic() + seconds, 0
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    for _ in range(8):  # the compute a real model would do per batch: keeps a fed GPU busy
        heavy = (heavy @ heavy).clamp_(-1, 1)
    step += 1
    if mode == "starved" or step % 10 == 0:
        writer.add_scalar("loss", loss.item(), step)
        writer.flush()
    if time.monotonic() > end:
        break
writer.close()
print(f"{mode}: {step} steps in {seconds:g} s")
EOF
for mode in starved fed; do
    logdir=$WORK/logs/$mode
    mkdir -p "$logdir"
    timeout $((JOB_SECONDS + 60)) "$PY" "$WORK/job.py" "$logdir/$mode" "$mode" "$JOB_SECONDS" \
        >>"$LOG" 2>&1 &
    job=$!
    sleep $((JOB_SECONDS * 3 / 4))  # well into training: points and a cadence to judge
    once_json "$logdir" "$FIGS/once_$mode.json" || note "distmon --once --json ($mode) exited $?"
    nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits \
        >>"$WORK/util_$mode.txt" 2>>"$LOG"
    wait $job || note "the $mode job exited $?"
done
"$PY" - "$FIGS" "$WORK" >>"$WORK/checks.txt" 2>>"$LOG" <<'EOF'
import json, sys
figs, work = sys.argv[1:3]
verdicts, problems = {}, []
for mode in ("starved", "fed"):
    try:
        doc = json.load(open(f"{figs}/once_{mode}.json"))
    except (OSError, ValueError, KeyError) as err:
        problems.append(f"{mode}: no distmon JSON ({err})")
        continue
    kinds = {a["kind"] for a in doc.get("alerts", [])}
    steps = [s["last_step"] for r in doc.get("runs", []) for s in r.get("scalars", {}).values()]
    utils = [g.get("utilization_gpu") for g in doc["gpus"]["devices"]]
    try:
        smi = open(f"{work}/util_{mode}.txt").read().split()
    except OSError:
        smi = []
    verdicts[mode] = {"input_bound_suspected": "input_bound_suspected" in kinds,
                      "alerts": sorted(kinds), "last_steps": steps, "distmon_util": utils,
                      "nvidia_smi_util": smi}
    if not steps:
        problems.append(f"{mode}: distmon read no loss points")
if "starved" in verdicts and not verdicts["starved"]["input_bound_suspected"]:
    problems.append(f"starved: no input-bound alert (GPU util {verdicts['starved']['distmon_util']})")
if "fed" in verdicts and verdicts["fed"]["input_bound_suspected"]:
    problems.append(f"fed: input-bound alert raised (GPU util {verdicts['fed']['distmon_util']})")
json.dump(verdicts, open(f"{figs}/torch_jobs.json", "w"), indent=1)
detail = "; ".join(f"{m}: util {v['distmon_util']}, suspected {v['input_bound_suspected']}"
                   for m, v in verdicts.items())
print(("FAIL" if problems else "PASS") + f" torch: {detail}"
      + (": " + "; ".join(problems) if problems else ""))
EOF

# --- 4: GPM through distmon against nvidia-smi dmon --gpm-metrics, under two loads on GPU 0 ---
cat >"$WORK/load.py" <<'EOF'
"""A load on GPU 0 for SECONDS: bf16 matmuls (the tensor cores' work) or device-to-device
copies of 1 GiB (a kernel always resident, no arithmetic: busy but not computing)."""
import sys, time
import torch

kind, seconds = sys.argv[1], float(sys.argv[2])
device = torch.device("cuda:0")
if kind == "matmul":
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    work = lambda: torch.matmul(a, b, out=c)
else:
    src = torch.empty(2**28, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    work = lambda: dst.copy_(src)
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    for _ in range(20):
        work()
    torch.cuda.synchronize()
    n += 20
print(f"{kind}: {n} iterations in {seconds:g} s")
EOF
cat >"$WORK/sample_gpm.py" <<'EOF'
"""distmon's NVML source on GPU 0 at 1 Hz, as the dashboard samples it: each GPM figure is
the mean over the second before it."""
import json, sys, time
from distcore.telemetry.nvml import NvmlGpuSource

out, reads = sys.argv[1], int(sys.argv[2])
source = NvmlGpuSource(pcie=False)
rows, reason = [], None
try:
    for i in range(reads):
        status, devices = source.read()
        reason = status.gpm_reason
        gpu = next((d for d in devices if d.index == 0), None)
        if gpu is not None and i > 0:  # the first reading is over 0.1 s: leave it out
            rows.append({k: getattr(gpu, k) for k in ("utilization_gpu", "sm_activity",
                         "sm_occupancy", "tensor_activity", "dram_bandwidth")})
        time.sleep(1.0)
finally:
    source.close()
json.dump({"samples": rows, "gpm_reason": reason}, open(out, "w"), indent=1)
EOF
GPM_IDS=2,3,5,10  # SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, DRAM_BW_UTIL (pynvml's ids)
for kind in matmul copy; do
    timeout $((LOAD_SECONDS + 30)) "$PY" "$WORK/load.py" "$kind" "$LOAD_SECONDS" >>"$LOG" 2>&1 &
    load=$!
    sleep 4  # allocated and running
    timeout 15 nvidia-smi dmon -i 0 --gpm-metrics $GPM_IDS -d 1 -c 7 >"$FIGS/dmon_$kind.txt" \
        2>>"$LOG" &
    dmon=$!
    timeout 30 "$PY" "$WORK/sample_gpm.py" "$FIGS/gpm_$kind.json" 8 2>>"$LOG" \
        || note "sample_gpm ($kind) exited $?"
    wait $dmon || note "nvidia-smi dmon --gpm-metrics ($kind) exited $?"
    once_json "$WORK/empty" "$FIGS/once_gpm_$kind.json" || note "distmon --once ($kind) exited $?"
    wait $load || note "the $kind load exited $?"
done
"$PY" - "$FIGS" "$GPM_IDS" >>"$WORK/checks.txt" 2>>"$LOG" <<'EOF'
import json, statistics, sys
figs, ids = sys.argv[1], sys.argv[2].split(",")
FIELDS = ("sm_activity", "sm_occupancy", "tensor_activity", "dram_bandwidth")  # ids' order
SLACK = 15.0  # points of %: two readers sampling the same second a little apart

def median(values):
    known = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(known) if known else None

def dmon_medians(path):
    """GPM columns come last in dmon's lines, in the order asked for; '-' is N/A."""
    columns = [[] for _ in ids]
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    for line in lines:
        cells = line.split()
        if not cells or line.lstrip().startswith("#") or not cells[0].isdigit():
            continue
        for slot, cell in enumerate(cells[-len(ids):]):
            try:
                columns[slot].append(float(cell))
            except ValueError:
                pass
    return {f: median(c) for f, c in zip(FIELDS, columns)} if any(columns) else None

figures, problems, detail = {}, [], []
for kind in ("matmul", "copy"):
    try:
        ours = json.load(open(f"{figs}/gpm_{kind}.json"))
        once = json.load(open(f"{figs}/once_gpm_{kind}.json"))["gpus"]
    except (OSError, ValueError, KeyError) as err:
        problems.append(f"{kind}: no distmon figures ({err})")
        continue
    samples = ours["samples"]
    got = {f: median([s[f] for s in samples]) for f in ("utilization_gpu", *FIELDS)}
    smi = dmon_medians(f"{figs}/dmon_{kind}.txt")
    first = next((d for d in once["devices"] if d["index"] == 0), {})
    figures[kind] = {"distmon": got, "nvidia_smi_dmon": smi, "once": first,
                     "gpm_reason": ours["gpm_reason"]}
    if got["sm_activity"] is None:  # no GPM on this GPU: say so, show null, never 0
        if not once.get("gpm_reason") or first.get("sm_activity") is not None:
            problems.append(f"{kind}: no GPM figures, yet no reason ({once.get('gpm_reason')})")
        detail.append(f"{kind}: no GPM ({once.get('gpm_reason')})")
        continue
    if first.get("sm_activity") is None:
        problems.append(f"{kind}: distmon --once shows no GPM where the sampler has it")
    detail.append(f"{kind}: util {got['utilization_gpu']}, sm {got['sm_activity']}, "
                  f"tensor {got['tensor_activity']}, dram {got['dram_bandwidth']} "
                  f"(dmon {smi})")
    if kind == "matmul" and not (got["tensor_activity"] or 0) >= 30:
        problems.append(f"matmul: tensor activity {got['tensor_activity']} < 30%")
    if kind == "copy":
        if not (got["utilization_gpu"] or 0) >= 90:
            problems.append(f"copy: util {got['utilization_gpu']} < 90%")
        if got["tensor_activity"] is None or got["tensor_activity"] > 5:
            problems.append(f"copy: tensor activity {got['tensor_activity']}, not ~0")
    if smi is None:
        problems.append(f"{kind}: nvidia-smi dmon --gpm-metrics printed no figures")
        continue
    for field in FIELDS:
        a, b = got[field], smi[field]
        if a is not None and b is not None and abs(a - b) > SLACK:
            problems.append(f"{kind} {field}: distmon {a:.1f} vs dmon {b:.1f}")
json.dump(figures, open(f"{figs}/gpm.json", "w"), indent=1)
print(("FAIL" if problems else "PASS") + " gpm: " + "; ".join(detail)
      + (": " + "; ".join(problems[:6]) if problems else ""))
EOF

# --- summary -----------------------------------------------------------------------------------
while IFS= read -r line; do
    RESULTS+=("$line")
    note "$line"
done < <(cat "$WORK/checks.txt" 2>/dev/null)
for want in nvml smi torch gpm; do
    printf '%s\n' "${RESULTS[@]}" | grep -q "^[A-Z]* $want:" || result FAIL "$want" "did not run (see $LOG)"
done
passed=$(printf '%s\n' "${RESULTS[@]}" | grep -c '^PASS ')
total=${#RESULTS[@]}
kill $WATCHDOG 2>/dev/null
printf '%s\n' "${RESULTS[@]}" >"$FIGS/summary.txt"
if [ "$passed" -eq "$total" ]; then
    printf '\nSUMMARY: PASS (%s of %s passed; figures in %s)\n' "$passed" "$total" "$FIGS" | tee -a "$LOG"
    exit 0
fi
printf '\nSUMMARY: FAIL (%s of %s passed; figures in %s)\n' "$passed" "$total" "$FIGS" | tee -a "$LOG"
exit 1
