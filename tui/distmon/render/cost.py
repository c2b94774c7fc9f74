"""What a job costs as one line, for `--once` and the focused job's panel (under its ledger).

Pure strings: `cost: 41.2 GPU-hours (8 GPUs), 38.0 kWh, $98.00; 62% of it was not compute`. A
figure nobody could measure reads `–` with the reason, never a zero.
"""

from __future__ import annotations

from distcore.jobs.cost import JobCost
from distcore.wording import counted
from distmon.formats import UNKNOWN, share


def amount(value: float) -> str:
    """A quantity in about three significant digits, grouped when large: `0.0123`, `4.56`,
    `41.2`, `1,234`."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return f"{value:.3g}"


def money(value: float) -> str:
    """`$98.00`, `$1,234.50`; under a cent, its significant digits (`$0.0012`)."""
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.2g}"


def _unknown(name: str, why: str | None) -> str:
    return f"{name} {UNKNOWN} ({why})" if why else f"{name} {UNKNOWN}"


def cost_line(cost: JobCost) -> str:
    """The job's GPU-hours, energy and money, then its share that was not compute."""
    if cost.gpu_hours is not None:
        gpus = f" ({counted(cost.gpus, 'GPU')})" if cost.gpus else ""
        hours = f"{amount(cost.gpu_hours)} GPU-hours{gpus}"
    else:
        hours = _unknown("GPU-hours", cost.why.get("gpu_hours"))
    energy = (f"{amount(cost.energy_kwh)} kWh" if cost.energy_kwh is not None
              else _unknown("energy", cost.why.get("energy")))
    paid = (money(cost.money) if cost.money is not None
            else _unknown("money", cost.why.get("money")))
    tail = ""
    if cost.not_compute is not None and (cost.gpu_hours is not None or cost.money is not None):
        tail = f"; {share(cost.not_compute)} of it was not compute"
    return f"{hours}, {energy}, {paid}{tail}"
