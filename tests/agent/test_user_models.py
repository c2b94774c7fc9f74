"""The user's own model, loss, metrics and data: refused in one line where they cannot train,
never cast to fit; the regression sample's FLOPs against a hand count."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distagent.cli import main

ROOT = Path(__file__).resolve().parents[2]
_modules = itertools.count()

USER_CODE = """
import keras, numpy as np, tensorflow as tf

def two_inputs():
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    out = keras.layers.Dense(1)(keras.layers.Concatenate()([a, b]))
    return keras.Model({"a": a, "b": b}, out)

def one_input(spec):
    inputs = keras.Input(spec[0].shape)
    return keras.Model(inputs, keras.layers.Dense(1)(inputs))

def regression_compiled(spec):
    model = one_input(spec)
    model.compile(loss="mse")
    return model

def not_a_model():
    return 3

def raises(spec):
    raise RuntimeError("the user's own bug")

def concatenated():
    x = np.zeros((64, 5), np.float32)
    return tf.data.Dataset.from_tensor_slices((x, np.zeros(64, np.float32)))

def vector_targets():
    x = np.zeros((64, 5), np.float32)
    return tf.data.Dataset.from_tensor_slices((x, np.zeros((64, 3), np.float32)))

def not_a_dataset():
    return [1, 2, 3]

def generator():
    def examples():
        while True:
            yield np.zeros(5, np.float32), np.float32(0)
    spec = (tf.TensorSpec((5,), tf.float32), tf.TensorSpec((), tf.float32))
    return tf.data.Dataset.from_generator(examples, output_signature=spec)
"""


def _config(tmp_path: Path, data: dict[str, Any], model: str, train: str = "") -> Path:
    """A config over the user code above (a fresh module name: nothing cached between cases)."""
    module = f"user_code_{next(_modules)}"
    (tmp_path / f"{module}.py").write_text(USER_CODE)
    source = data.get("source", "python")
    table = ""
    if source == "python":
        table = f'[data.python]\nfactory = "{module}:{data["factory"]}"\n'
    elif source == "npz":
        np.savez(tmp_path / "data.npz", x=data["x"], y=data["y"])
        table = f'[data.npz]\npath = "{tmp_path / "data.npz"}"\n'
    name = f"{module}:{model}" if model[0] != "!" else model[1:]
    text = textwrap.dedent(f"""\
        [run]
        logdir = "{tmp_path / 'runs'}"
        [strategy]
        kind = "one_device"
        [data]
        source = "{source}"
        per_replica_batch_size = 8
        {table}
        [model]
        name = "{name}"
        [train]
        {train if "steps_per_epoch" in train else train + chr(10) + "steps_per_epoch = 2"}
        """)
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


X = np.random.default_rng(0).standard_normal((64, 5)).astype(np.float32)
BAD: dict[str, tuple[Any, ...]] = {
    "not importable": ({"factory": "concatenated"}, "!no_such_module_here:build", "",
                       "model.name: cannot import 'no_such_module_here:build'"),
    "not a model": ({"factory": "concatenated"}, "not_a_model", "", "not a keras.Model"),
    "model raises": ({"factory": "concatenated"}, "raises", "",
                     "model.name:", "RuntimeError: the user's own bug"),
    "not a dataset": ({"factory": "not_a_dataset"}, "one_input", "",
                      "data.python.factory: returned list, not a tf.data.Dataset"),
    "features do not fit": ({"factory": "concatenated"}, "two_inputs", 'loss = "mse"',
                            "model.name: the model cannot take the data's features float32[5]"),
    "unknown loss": ({"factory": "concatenated"}, "one_input", 'loss = "msee"',
                     "train.loss: Keras knows no loss 'msee'"),
    "unknown metric": ({"factory": "concatenated"}, "one_input",
                       'loss = "mse"\nmetrics = ["nope"]', "train.metrics: Keras knows no metric"),
    "stateful metric": ({"factory": "concatenated"}, "one_input",
                        'loss = "mse"\nmetrics = ["AUC"]', "keeps state across batches"),
    "generator without steps": ({"factory": "generator"}, "one_input",
                                'loss = "mse"\nsteps_per_epoch = 0',
                                "train.steps_per_epoch: the data's size is unknown"),
    "target shape": ({"factory": "vector_targets"}, "one_input", 'loss = "mse"',
                     "train.loss: labels of shape [3] do not fit outputs of shape [1]"),
    # A float target in (0, 1): once cast to class 0, it trained to `acc 1.000`.
    "float labels, classifier loss": ({"source": "npz", "x": X, "y": np.linspace(0.1, 0.9, 64)},
                                      "!mlp", "", "takes class ids, but the labels are float32"),
    "negative class id": ({"source": "npz", "x": X, "y": np.arange(64) % 3 - 1}, "!mlp", "",
                          "train.loss: class id -1 is out of range"),
    "sequence labels": ({"source": "npz", "x": X, "y": np.zeros((64, 4), np.int64)}, "!mlp", "",
                        "train.loss: labels of shape [4] do not fit outputs of shape [2]"),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_one_line_in_plan(tf: Any, case: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    data, model, train, *expected = BAD[case]
    monkeypatch.chdir(tmp_path)
    path = _config(tmp_path, data, model, train)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for text in expected:
        assert text in err


def test_float_targets_keep_the_compiled_loss(tf: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Float labels are no longer cast to class ids: the model's own compile(loss="mse")
    holds, and the float targets reach it."""
    from distagent.commands.plan import resolve_plan
    from distagent.config import load_config
    from distagent.data import element_spec, open_source
    from distagent.model_check import check_job

    monkeypatch.chdir(tmp_path)
    y = np.linspace(0.1, 0.9, 64)
    path = _config(tmp_path, {"source": "npz", "x": X, "y": y}, "regression_compiled")
    cfg = load_config(path)
    source = open_source(cfg)
    assert element_spec(source)[1].dtype == tf.float32 and source.num_classes == 0
    assert check_job(cfg, source) is not None
    assert resolve_plan(cfg).num_examples == 64


def test_regression_flops_match_a_hand_count(tf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The regression sample's MLP (8 -> 32 -> 32 -> 1): multiply-adds of its three layers
    plus their biases, as the plan prints them."""
    from distagent.commands.plan import format_plan, resolve_plan
    from distagent.config import load_config
    from examples.regression import FEATURES, HIDDEN

    monkeypatch.chdir(ROOT)
    cfg = load_config(ROOT / "sample_configs" / "regression.toml")
    plan = resolve_plan(cfg)
    layers = [(FEATURES, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 1)]
    by_hand = sum(2 * n_in * n_out + n_out for n_in, n_out in layers)
    assert plan.forward_flops_per_example is not None
    assert abs(plan.forward_flops_per_example - by_hand) <= 0.1 * by_hand
    assert f"per example {3 * plan.forward_flops_per_example:.3e}" in format_plan(cfg, plan)


COMPILED = {
    "nothing compiled: the classifier": (None, None, ["sparse_categorical_crossentropy"] * 2,
                                         ["p_accuracy", "q_accuracy"]),
    "one loss for every output": ("mse", ["mae"], ["mean_squared_error"] * 2,
                                  ["p_mae", "q_mae"]),
    "a list per output": (["mse", "sparse_categorical_crossentropy"], [["mae"], ["accuracy"]],
                          ["mean_squared_error", "sparse_categorical_crossentropy"],
                          ["p_mae", "q_accuracy"]),
    "a dict per output": ({"p": "huber", "q": "sparse_categorical_crossentropy"},
                          {"q": "accuracy"}, ["huber", "sparse_categorical_crossentropy"],
                          ["q_accuracy"]),
}


@pytest.mark.parametrize("case", list(COMPILED), ids=list(COMPILED))
def test_a_compiled_models_loss_and_metrics_hold_per_output(tf: Any, case: str) -> None:
    import keras

    from distagent.objective import resolve_objective

    loss, metrics, losses, tags = COMPILED[case]
    inputs = keras.Input((3,))
    x = keras.layers.Dense(4)(inputs)
    model = keras.Model(inputs, [keras.layers.Dense(1, name="p")(x),
                                 keras.layers.Dense(3, name="q", activation="softmax")(x)])
    if loss is not None:
        model.compile(loss=loss, metrics=metrics)
    objective = resolve_objective("", (), model)
    assert [out.loss_name for out in objective.outputs] == losses
    assert list(objective.metric_tags) == tags
