"""One worker of bench/agent_soak.py's anchor: bare TensorFlow, no distagent.

A two-worker MultiWorkerMirroredStrategy loop of the soak's size (an 8-16-4 MLP, 8 examples per
worker, one compiled step per call, the host reading the loss every `log_every` steps), as the
TensorFlow tutorials write it. It prints one JSON line: its RSS and threads at the warm-up step
and at the last one, read the same way the soak reads distagent's workers (psutil, /proc).

Run by agent_soak.py: python bench/_bare_multi.py STEPS WARMUP LOG_EVERY INDEX ADDR0 ADDR1 KEYS
(KEYS: "fresh", TensorFlow's default instance key per call, or "traced", the agent's setting).
"""

import json
import os
import sys
from typing import Any

steps, warmup, log_every, index = (int(a) for a in sys.argv[1:5])
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": sys.argv[5:7]},
                                      "task": {"type": "worker", "index": index}})
import keras  # noqa: E402  (TF_CONFIG first: the strategy reads it)
import psutil  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.distribute import cross_device_utils  # noqa: E402

if sys.argv[7] == "traced":
    cross_device_utils.CollectiveReplicaLauncher._prefer_unique_instance_key = False
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(4)])
    optimizer = keras.optimizers.SGD(0.01)
features = tf.random.normal([256, 8])
labels = tf.random.uniform([256], 0, 4, tf.int64)
batches = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16)
iterator = iter(strategy.experimental_distribute_dataset(batches))
loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)


def replica_step(x: Any, y: Any) -> Any:
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(loss_of(y, model(x, training=True)),
                                          global_batch_size=16)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def train_step(it: Any) -> Any:
    return strategy.reduce("SUM", strategy.run(replica_step, args=next(it)), axis=None)


def now(step: int) -> dict[str, Any]:
    return {"step": step, "rss_mib": psutil.Process().memory_info().rss / 2**20,
            "threads": len(os.listdir("/proc/self/task"))}


first = None
for step in range(1, steps + 1):
    loss = train_step(iterator)
    if step % log_every == 0 or step == steps:
        loss.numpy()
        if step >= warmup and first is None:
            first = now(step)
print(json.dumps({"first": first, "last": now(steps)}), flush=True)
