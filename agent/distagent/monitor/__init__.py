"""Watch your own script: what a distagent job writes, from a plain Keras or TensorFlow script.

    from distagent import monitor

    model.fit(dataset, callbacks=[monitor.KerasCallback(logdir)])

    with monitor.run(logdir, strategy=strategy) as run:
        for batch in run.iterate(dist_dataset):
            run.step(loss=train_step(batch))

`distmon <logdir>` then shows the script as it shows a distagent job (docs/agent.md).
"""

from distagent.monitor.custom import Run, Stopped, run
from distagent.monitor.keras_callback import KerasCallback
from distagent.monitor.session import MonitorError

__all__ = ["KerasCallback", "MonitorError", "Run", "Stopped", "run"]
