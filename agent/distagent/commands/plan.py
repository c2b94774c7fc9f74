"""`distagent plan CONFIG [--set k=v] [--json]`: the devices, batch, learning rate and input
pipeline a job would use, and the warnings, without training.

Config values (names, paths, model specs) are outside strings: the text form escapes them with
`distcore.textsafe.terminal_text`; the JSON form is ASCII, so no control character or
undecodable byte reaches the terminal raw either."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from distagent.config import load_config
from distagent.flops import flops_text, peak_text
from distagent.plan import Plan
from distagent.schema import JobConfig
from distcore.textsafe import terminal_text
from distcore.wording import counted

VALUE_WIDTH = 400  # characters of one row: a 10,000-character run name is elided


def run(args: argparse.Namespace) -> int:
    cfg = load_config(Path(args.config), args.overrides)
    plan = resolve_plan(cfg)
    if args.json:
        print(json.dumps(plan.to_json()))
    else:
        print(format_plan(cfg, plan))
    return 0


def resolve_plan(cfg: JobConfig) -> Plan:
    """Resolve the strategy's devices and plan the job on them (TensorFlow starts here); the
    model is built once for the data's shape, so the plan refuses what `start` would."""
    from distagent.cluster.strategy import planned_setup
    from distagent.commands.start import user_code_path
    from distagent.data import open_source
    from distagent.devices import resolve_strategy
    from distagent.flops import counted_plan
    from distagent.model_check import check_job
    from distagent.pipeline import plan_for

    if cfg.strategy.kind == "multi_worker":
        setup = planned_setup(cfg.cluster, os.environ)
    else:
        setup = resolve_strategy(cfg.strategy)
    user_code_path(cfg.model.name)
    source = open_source(cfg)
    forward = check_job(cfg, source)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices, workers=setup.workers,
                    source=source)
    plan, unknown = counted_plan(cfg, plan, forward, hosts=setup.hosts)
    extra = (*setup.warnings, *unknown)
    return _with_warnings(plan, extra) if extra else plan


def _with_warnings(plan: Plan, extra: tuple[str, ...]) -> Plan:
    import dataclasses

    return dataclasses.replace(plan, warnings=tuple(extra) + plan.warnings)


def format_plan(cfg: JobConfig, plan: Plan) -> str:
    rows: list[tuple[str, Any]] = [
        ("job", f"{cfg.run.name} (model {cfg.model.name}, data {cfg.data.source})"),
        ("replicas", f"{plan.replicas} on {counted(plan.workers, 'worker')}: "
                     f"{', '.join(plan.devices)}"),
        ("batch", f"{plan.per_replica_batch_size} per replica × {plan.replicas} = "
                  f"{plan.global_batch_size} global"),
        ("learning rate", plan.learning_rate_provenance),
        ("optimizer", f"{cfg.optimizer.name}, decay {cfg.optimizer.decay}"),
        ("warmup", f"{counted(plan.warmup_steps, 'step')} ({plan.warmup_epochs:g} "
                   f"{'epoch' if plan.warmup_epochs == 1 else 'epochs'})"),
        ("examples", _examples(plan)),
        ("steps", f"{plan.steps_per_epoch} per epoch × {counted(plan.epochs, 'epoch')} = "
                  f"{plan.total_steps}"),
        ("pipeline", ", ".join(f"{k}={v}" for k, v in plan.pipeline.items())),
        ("sharding", "by the data factory (its input context)" if plan.shard_policy == "OFF"
                     else f"{plan.shard_policy} across workers"),
        ("compute", f"mixed_precision={str(plan.mixed_precision).lower()}, "
                    f"jit_compile={str(plan.jit_compile).lower()}"),
        ("model FLOPs", flops_text(plan)),
        ("peak", peak_text(plan)),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {terminal_text(v, VALUE_WIDTH)}" for k, v in rows]
    lines.extend(f"warning: {terminal_text(w, VALUE_WIDTH)}" for w in plan.warnings)
    return "\n".join(lines)


def _examples(plan: Plan) -> str:
    if plan.num_examples is None:
        return "unknown (the data does not say its size): train.steps_per_epoch makes an epoch"
    return (f"{plan.num_examples} ({plan.train_examples} train, {plan.validation_examples} "
            f"validation = {counted(plan.validation_steps, 'step')})")
