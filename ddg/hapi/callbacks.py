"""Callbacks of ``ddg.Model`` (Paddle's ``paddle.callbacks``).

A callback is told about every stage of ``fit``, ``evaluate`` and ``predict``:
``on_{train,eval,predict}_{begin,end}(logs)``, ``on_epoch_{begin,end}(epoch, logs)``
and ``on_{train,eval,predict}_batch_{begin,end}(step, logs)``. ``logs`` holds the
latest values by name (``'loss'`` and the metrics' names), ``'step'`` and
``'batch_size'`` (the global batch: local batch x ranks). ``self.model`` is the
``ddg.Model``; ``self.params`` holds ``epochs``, ``steps``, ``verbose``, ``metrics``.

``fit`` adds a :class:`ProgBarLogger` (unless ``verbose=0`` or one is given), a
:class:`ModelCheckpoint` and an :class:`LRScheduler` to the callbacks it is given, as
Paddle's does, and an :class:`ElasticCheckpoint` under ``ddgrun --max_restarts``. Under several ranks, printing and saving happen on rank 0 only.
"""
import numbers
import os
import time
import warnings

import numpy as np

from .progressbar import ProgressBar

__all__ = ["Callback", "ProgBarLogger", "ModelCheckpoint", "LRScheduler", "EarlyStopping",
           "ReduceLROnPlateau", "ElasticCheckpoint", "VisualDL", "WandbCallback", "config_callbacks", "CallbackList"]


def _rank():
    from ..parallel.env import get_rank
    return get_rank()


def config_callbacks(callbacks=None, model=None, batch_size=None, epochs=None, steps=None, log_freq=2,
                     verbose=2, save_freq=1, save_dir=None, metrics=None, mode="train"):
    """The callbacks a Model run uses: the given ones plus the defaults it lacks."""
    given = callbacks or []
    cbks = list(given) if isinstance(given, (list, tuple)) else [given]
    for c in cbks:
        if not isinstance(c, Callback):
            raise TypeError(f"ddg.Model: callbacks must be ddg.callbacks.Callback objects, got {type(c).__name__}")
    if verbose and not any(isinstance(c, ProgBarLogger) for c in cbks):
        cbks = [ProgBarLogger(log_freq, verbose=verbose)] + cbks
    if not any(isinstance(c, ModelCheckpoint) for c in cbks):
        cbks = cbks + [ModelCheckpoint(save_freq, save_dir)]
    for c in cbks:
        if isinstance(c, EarlyStopping):
            c.save_dir = save_dir
    if not any(isinstance(c, LRScheduler) for c in cbks):
        cbks = cbks + [LRScheduler()]
    # commits see every other callback's work on the step (the scheduler's step included)
    cbks = [c for c in cbks if not isinstance(c, ElasticCheckpoint)] + \
        [c for c in cbks if isinstance(c, ElasticCheckpoint)]
    out = CallbackList(cbks)
    out.set_model(model)
    out.set_params({"batch_size": batch_size, "epochs": epochs, "steps": steps, "verbose": verbose,
                    "metrics": (metrics or []) if mode != "test" else []})
    return out


class CallbackList:
    """Calls every callback in order."""

    def __init__(self, callbacks=None):
        if callbacks is None:
            raise TypeError("CallbackList needs a list of callbacks")
        self.callbacks = list(callbacks)
        self.params = {}
        self.model = None

    def append(self, callback):
        self.callbacks.append(callback)

    def __iter__(self):
        return iter(self.callbacks)

    def set_params(self, params):
        self.params = params
        for c in self.callbacks:
            c.set_params(params)

    def set_model(self, model):
        self.model = model
        for c in self.callbacks:
            c.set_model(model)

    def _call(self, name, *args):
        for c in self.callbacks:
            getattr(c, name)(*args)

    @staticmethod
    def _check_mode(mode):
        if mode not in ("train", "eval", "predict"):
            raise ValueError(f"callback mode must be 'train', 'eval' or 'predict', got {mode!r}")

    def on_begin(self, mode, logs=None):
        self._check_mode(mode)
        self._call(f"on_{mode}_begin", logs)

    def on_end(self, mode, logs=None):
        self._check_mode(mode)
        self._call(f"on_{mode}_end", logs)

    def on_epoch_begin(self, epoch=None, logs=None):
        self._call("on_epoch_begin", epoch, logs)

    def on_epoch_end(self, epoch=None, logs=None):
        self._call("on_epoch_end", epoch, logs)

    def on_batch_begin(self, mode, step=None, logs=None):
        self._check_mode(mode)
        self._call(f"on_{mode}_batch_begin", step, logs)

    def on_batch_end(self, mode, step=None, logs=None):
        self._check_mode(mode)
        self._call(f"on_{mode}_batch_end", step, logs)


class Callback:
    """Base class of callbacks: override the ``on_*`` methods you need."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self.model = model

    def on_train_begin(self, logs=None):
        """At the start of ``fit``."""

    def on_train_end(self, logs=None):
        """At the end of ``fit``."""

    def on_eval_begin(self, logs=None):
        """At the start of an evaluation (``logs``: ``steps`` and ``metrics``)."""

    def on_eval_end(self, logs=None):
        """At the end of an evaluation (``logs``: the evaluation's results)."""

    def on_predict_begin(self, logs=None):
        """At the start of ``predict``."""

    def on_predict_end(self, logs=None):
        """At the end of ``predict``."""

    def on_epoch_begin(self, epoch, logs=None):
        """At the start of a training epoch."""

    def on_epoch_end(self, epoch, logs=None):
        """At the end of a training epoch (``logs``: its last values)."""

    def on_train_batch_begin(self, step, logs=None):
        """Before a training step."""

    def on_train_batch_end(self, step, logs=None):
        """After a training step."""

    def on_eval_batch_begin(self, step, logs=None):
        """Before an evaluation step."""

    def on_eval_batch_end(self, step, logs=None):
        """After an evaluation step."""

    def on_predict_batch_begin(self, step, logs=None):
        """Before a prediction step."""

    def on_predict_batch_end(self, step, logs=None):
        """After a prediction step."""


class ProgBarLogger(Callback):
    """Prints progress and the latest loss and metrics (rank 0 only).

    Args:
        log_freq: print every this many steps.
        verbose: 0 silent, 1 a progress bar (only its final state when stdout is not
            a terminal), 2 one line per ``log_freq`` steps, 3 as 2 plus reader and
            batch times and samples per second.
    """

    def __init__(self, log_freq=1, verbose=2):
        super().__init__()
        if not isinstance(log_freq, numbers.Integral) or log_freq < 1:
            raise ValueError(f"ProgBarLogger: log_freq must be a positive int, got {log_freq!r}")
        self.epochs = None
        self.steps = None
        self.progbar = None
        self.verbose = verbose
        self.log_freq = int(log_freq)

    def _is_print(self):
        return bool(self.verbose) and _rank() == 0

    @staticmethod
    def _new_timer():
        return {"data_time": 0.0, "batch_time": 0.0, "count": 0, "samples": 0}

    def on_train_begin(self, logs=None):
        self.epochs = self.params.get("epochs")
        self.train_metrics = self.params.get("metrics") or []
        self._train_timer = self._new_timer()
        if self._is_print():
            print("The loss value printed in the log is the current step, and the metric is the average "
                  "value of previous steps.")

    def on_epoch_begin(self, epoch=None, logs=None):
        self.steps = self.params.get("steps")
        self.epoch = epoch
        self.train_step = 0
        if self.epochs and self._is_print():
            print(f"Epoch {epoch + 1}/{self.epochs}")
        self.train_progbar = ProgressBar(num=self.steps, verbose=self.verbose)
        self._train_timer["batch_start_time"] = time.time()

    def _updates(self, logs, mode):
        logs = logs or {}
        values = [(k, logs[k]) for k in getattr(self, f"{mode}_metrics") if k in logs]
        timer = getattr(self, f"_{mode}_timer", None)
        if self.verbose == 3 and timer is not None:
            cnt = timer["count"] or 1.0
            samples = timer["samples"] or 1.0
            spent = timer["data_time"] + timer["batch_time"]
            values.append(("avg_reader_cost", "%.5f sec" % (timer["data_time"] / cnt)))
            values.append(("avg_batch_cost", "%.5f sec" % (timer["batch_time"] / cnt)))
            values.append(("ips", "%.5f samples/sec" % (samples / spent if spent > 0 else 0.0)))
            timer.update(count=0, samples=0, data_time=0.0, batch_time=0.0)
        getattr(self, f"{mode}_progbar").update(getattr(self, f"{mode}_step"), values)

    def _batch_begin(self, mode):
        timer = getattr(self, f"_{mode}_timer")
        timer["batch_data_end_time"] = time.time()
        timer["data_time"] += timer["batch_data_end_time"] - timer["batch_start_time"]

    def _batch_end(self, mode, logs):
        timer = getattr(self, f"_{mode}_timer")
        timer["batch_time"] += time.time() - timer["batch_data_end_time"]
        timer["count"] += 1
        timer["samples"] += (logs or {}).get("batch_size", 1)

    def on_train_batch_begin(self, step, logs=None):
        self._batch_begin("train")

    def on_train_batch_end(self, step, logs=None):
        self.train_step += 1
        self._batch_end("train", logs)
        if self._is_print() and self.train_step % self.log_freq == 0:
            if self.steps is None or self.train_step < self.steps:
                self._updates(logs, "train")
        self._train_timer["batch_start_time"] = time.time()

    def on_epoch_end(self, epoch, logs=None):
        if self._is_print() and self.steps is not None:
            self._updates(logs, "train")

    def on_eval_begin(self, logs=None):
        logs = logs or {}
        self.eval_steps = logs.get("steps")
        self.eval_metrics = logs.get("metrics", [])
        self.eval_step = 0
        self.evaled_samples = 0
        self._eval_timer = self._new_timer()
        self.eval_progbar = ProgressBar(num=self.eval_steps, verbose=self.verbose)
        if self._is_print():
            print("Eval begin...")
        self._eval_timer["batch_start_time"] = time.time()

    def on_eval_batch_begin(self, step, logs=None):
        self._batch_begin("eval")

    def on_eval_batch_end(self, step, logs=None):
        self.eval_step += 1
        self.evaled_samples += (logs or {}).get("batch_size", 1)
        self._batch_end("eval", logs)
        if self._is_print() and self.eval_step % self.log_freq == 0:
            if self.eval_steps is None or self.eval_step < self.eval_steps:
                self._updates(logs, "eval")
        self._eval_timer["batch_start_time"] = time.time()

    def on_eval_end(self, logs=None):
        if self._is_print() and self.eval_steps is not None:
            self._updates(logs, "eval")
            print(f"Eval samples: {self.evaled_samples}")

    def on_predict_begin(self, logs=None):
        logs = logs or {}
        self.test_steps = logs.get("steps")
        self.test_metrics = logs.get("metrics", [])
        self.test_step = 0
        self.tested_samples = 0
        self._test_timer = self._new_timer()
        self.test_progbar = ProgressBar(num=self.test_steps, verbose=self.verbose)
        if self._is_print():
            print("Predict begin...")
        self._test_timer["batch_start_time"] = time.time()

    def on_predict_batch_begin(self, step, logs=None):
        self._batch_begin("test")

    def on_predict_batch_end(self, step, logs=None):
        self.test_step += 1
        self.tested_samples += (logs or {}).get("batch_size", 1)
        self._batch_end("test", logs)
        if self.test_step % self.log_freq == 0 and self._is_print():
            if self.test_steps is None or self.test_step < self.test_steps:
                self._updates(logs, "test")
        self._test_timer["batch_start_time"] = time.time()

    def on_predict_end(self, logs=None):
        if self._is_print():
            if self.test_step % self.log_freq != 0 or self.verbose == 1:
                self._updates(logs, "test")
            print(f"Predict samples: {self.tested_samples}")


class ModelCheckpoint(Callback):
    """Saves the model (``save_dir/<epoch>`` every ``save_freq`` epochs, and
    ``save_dir/final`` at the end of training); nothing without ``save_dir``. It calls
    ``Model.save`` on every rank: rank 0 writes, the others wait until it has."""

    def __init__(self, save_freq=1, save_dir=None):
        super().__init__()
        if not isinstance(save_freq, numbers.Integral) or save_freq < 1:
            raise ValueError(f"ModelCheckpoint: save_freq must be a positive int, got {save_freq!r}")
        self.save_freq = int(save_freq)
        self.save_dir = save_dir

    def on_epoch_begin(self, epoch=None, logs=None):
        self.epoch = epoch

    def _is_save(self):
        # every rank calls Model.save, which writes on rank 0 and has the others wait
        return self.model is not None and bool(self.save_dir)

    def _save(self, path):
        if _rank() == 0:
            print(f"save checkpoint at {os.path.abspath(path)}")
        self.model.save(path)

    def on_epoch_end(self, epoch, logs=None):
        if self._is_save() and self.epoch % self.save_freq == 0:
            self._save(f"{self.save_dir}/{epoch}")

    def on_train_end(self, logs=None):
        if self._is_save():
            self._save(f"{self.save_dir}/final")


_fits = 0      # fits with an ElasticCheckpoint begun in this process


class ElasticCheckpoint(Callback):
    """Makes ``fit`` survive failures and preemption (``ddg.distributed.elastic``):
    at the start it resumes from the last commit in ``checkpoint_dir`` (default
    ``$DDG_ELASTIC_DIR``, else ``./ddg_elastic``) if there is one, skipping the epochs
    done and, mid-epoch, the batches already seen; it commits the network, optimizer,
    LR scheduler, loss scaler, the loader's position and every rank's random state
    every ``save_steps`` optimizer steps and at each epoch's end. SIGTERM then commits
    at the next step and ends the job with status 75 (see ``ddg.distributed.elastic``).

    ``fit`` adds one by itself when the job runs under ``ddgrun --max_restarts N``
    (``DDG_MAX_RESTARTS`` > 0) or ``DDG_ELASTIC_DIR`` is set. Not kept: the metrics
    accumulated in an interrupted epoch (the resumed epoch's logs cover its remaining
    batches) and the state of other callbacks (``EarlyStopping``'s patience count).
    It runs after the other callbacks, so that each commit sees the step complete.

    The k-th ``fit`` of a process commits into ``<checkpoint_dir>/fit-<k>``: a program
    that calls ``fit`` several times, restarted, finds each call's own commit (the
    finished ones restore their final state and train no more)."""

    def __init__(self, save_steps=1, checkpoint_dir=None):
        super().__init__()
        if not isinstance(save_steps, numbers.Integral) or isinstance(save_steps, bool) or save_steps < 1:
            raise ValueError(f"ElasticCheckpoint: save_steps must be a positive int, got {save_steps!r}")
        self.save_steps = int(save_steps)
        self.checkpoint_dir = checkpoint_dir
        self.state = None
        self._updates = 0

    def on_train_begin(self, logs=None):
        from ..distributed import elastic
        from ..io.dataloader import DataLoader
        model = self.model
        objects = {"model": model.network}
        if model._optimizer is not None:
            objects["optimizer"] = model._optimizer
        sched = _scheduler_of(model)
        if sched is not None:
            objects["lr_scheduler"] = sched
        if getattr(model, "_scaler", None) is not None:
            objects["scaler"] = model._scaler
        loader = getattr(model, "_train_dataloader", None)
        if isinstance(loader, DataLoader) and not loader._iterable:
            objects["loader"] = loader
        else:
            warnings.warn("ElasticCheckpoint: the training data is not a DataLoader over a map-style dataset, "
                          "so a resumed epoch starts over from its first batch")
        global _fits
        _fits += 1
        where = os.path.join(self.checkpoint_dir or elastic.default_dir(), f"fit-{_fits}")
        self.state = elastic.State(checkpoint_dir=where, epoch=0, **objects)
        if not self.state.restore():
            self.state.sync()
        model._start_epoch = int(self.state.epoch)
        self._updates = 0

    def on_train_batch_end(self, step, logs=None):
        if self.state is None:
            return
        steps = self.params.get("steps")
        if (step + 1) % self.model._accumulate and not (steps is not None and step + 1 == steps):
            return            # gradients are still adding up: not a step boundary
        self._updates += 1
        if self._updates % self.save_steps == 0:
            self.state.commit()
        else:
            self.state.check_preemption()

    def on_epoch_end(self, epoch, logs=None):
        if self.state is not None:
            self.state.epoch = epoch + 1
            self.state.commit()

    def on_train_end(self, logs=None):
        if self.state is not None:
            self.state.close()
        self.state = None


def _scheduler_of(model):
    from ..optimizer.lr import LRScheduler as _Sched
    opt = getattr(model, "_optimizer", None) if model is not None else None
    lr = getattr(opt, "_learning_rate", None)
    return lr if isinstance(lr, _Sched) else None


class LRScheduler(Callback):
    """Steps the optimizer's learning-rate scheduler after every training step
    (``by_step``, the default) or after every epoch (``by_epoch``)."""

    def __init__(self, by_step=True, by_epoch=False):
        super().__init__()
        if by_step and by_epoch:
            raise ValueError("LRScheduler: by_step and by_epoch are mutually exclusive")
        self.by_step = by_step
        self.by_epoch = by_epoch

    def on_epoch_end(self, epoch, logs=None):
        if self.by_epoch:
            sched = _scheduler_of(self.model)
            if sched is not None:
                sched.step()

    def on_train_batch_end(self, step, logs=None):
        if self.by_step:
            sched = _scheduler_of(self.model)
            if sched is not None:
                sched.step()


def _monitored(logs, monitor):
    """The number under ``monitor`` in ``logs`` (the first of a list), or None."""
    current = logs[monitor]
    if isinstance(current, (list, tuple)):
        current = current[0]
    if isinstance(current, np.ndarray) and current.size == 1:
        current = current.item()
    if isinstance(current, (numbers.Number, np.generic)):
        return current
    return None


class EarlyStopping(Callback):
    """Stops training when the monitored evaluation value stops improving.

    Args:
        monitor: ``'loss'`` or a metric's name, as in the evaluation logs.
        mode: ``'min'``, ``'max'`` or ``'auto'`` (max for names containing 'acc').
        patience: evaluations without improvement before stopping.
        verbose: print a message when stopping.
        min_delta: the least change that counts as an improvement.
        baseline: a value to beat from the start.
        save_best_model: save ``save_dir/best_model`` (``fit``'s save_dir) at each
            improvement.
    """

    def __init__(self, monitor="loss", mode="auto", patience=0, verbose=1, min_delta=0, baseline=None,
                 save_best_model=True):
        super().__init__()
        self.monitor = monitor
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.min_delta = abs(min_delta)
        self.wait_epoch = 0
        self.best_weights = None
        self.stopped_epoch = 0
        self.save_best_model = save_best_model
        self.save_dir = None
        if mode not in ("auto", "min", "max"):
            warnings.warn(f"EarlyStopping mode {mode} is unknown, fallback to auto mode.")
            mode = "auto"
        if mode == "min" or (mode == "auto" and "acc" not in self.monitor):
            self.monitor_op = np.less
            self.min_delta *= -1
        else:
            self.monitor_op = np.greater

    def on_train_begin(self, logs=None):
        self.wait_epoch = 0
        if self.baseline is not None:
            self.best_value = self.baseline
        else:
            self.best_value = np.inf if self.monitor_op == np.less else -np.inf
            self.best_weights = None

    def on_eval_end(self, logs=None):
        if logs is None or self.monitor not in logs:
            warnings.warn("Monitor of EarlyStopping should be loss or metric name.")
            return
        current = _monitored(logs, self.monitor)
        if current is None:
            return
        if self.monitor_op(current - self.min_delta, self.best_value):
            self.best_value = current
            self.wait_epoch = 0
            if self.save_best_model and self.save_dir is not None:
                self.model.save(os.path.join(self.save_dir, "best_model"))
        else:
            self.wait_epoch += 1
        if self.wait_epoch >= self.patience:
            self.model.stop_training = True
            if self.verbose > 0 and _rank() == 0:
                print(f"Epoch {self.stopped_epoch + 1}: Early stopping.")
                if self.save_best_model and self.save_dir is not None:
                    print(f"Best checkpoint has been saved at "
                          f"{os.path.abspath(os.path.join(self.save_dir, 'best_model'))}")
        self.stopped_epoch += 1


class ReduceLROnPlateau(Callback):
    """Multiplies a float learning rate by ``factor`` when the monitored evaluation
    value has not improved for ``patience`` evaluations (not below ``min_lr``; then
    waits ``cooldown`` evaluations). A scheduler-driven learning rate is left alone
    with a warning."""

    def __init__(self, monitor="loss", factor=0.1, patience=10, verbose=1, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0):
        super().__init__()
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau does not support a factor >= 1.0.")
        self.monitor = monitor
        self.factor = factor
        self.min_lr = min_lr
        self.min_delta = min_delta
        self.patience = patience
        self.verbose = verbose
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.wait = 0
        self.best = 0
        self.mode = mode
        self.monitor_op = None
        self.epoch = 0
        self._reset()

    def _reset(self):
        if self.mode not in ("auto", "min", "max"):
            warnings.warn(f"Learning rate reduction mode {self.mode} is unknown, fallback to auto mode.")
            self.mode = "auto"
        if self.mode == "min" or (self.mode == "auto" and "acc" not in self.monitor):
            self.monitor_op = lambda a, b: np.less(a, b - self.min_delta)
            self.best = np.inf
        else:
            self.monitor_op = lambda a, b: np.greater(a, b + self.min_delta)
            self.best = -np.inf
        self.cooldown_counter = 0
        self.wait = 0

    def on_train_begin(self, logs=None):
        self._reset()

    def in_cooldown(self):
        return self.cooldown_counter > 0

    def on_eval_end(self, logs=None):
        if logs is None or self.monitor not in logs:
            warnings.warn("Monitor of ReduceLROnPlateau should be loss or metric name.")
            return
        opt = getattr(self.model, "_optimizer", None)
        lr = getattr(opt, "_learning_rate", None)
        if not isinstance(lr, float):
            warnings.warn(f"Expected learning_rate be float, bug got {type(lr)}.")
            return
        current = _monitored(logs, self.monitor)
        if current is None:
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self.monitor_op(current, self.best):
            self.best = current
            self.wait = 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience:
                old_lr = opt.get_lr()
                if old_lr > np.float32(self.min_lr):
                    new_lr = max(old_lr * self.factor, self.min_lr)
                    opt.set_lr(new_lr)
                    if self.verbose > 0 and _rank() == 0:
                        print(f"\nEpoch {self.epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.")
                    self.cooldown_counter = self.cooldown
                    self.wait = 0
        self.epoch += 1


class _ScalarWriter(Callback):
    """Shared logic of VisualDL and WandbCallback: training values per step, evaluation
    values per epoch, on rank 0."""

    def _is_write(self):
        return _rank() == 0

    def on_train_begin(self, logs=None):
        self.epochs = self.params.get("epochs")
        self.train_metrics = self.params.get("metrics") or []
        self._is_fit = True
        self.train_step = 0
        self.epoch = 0

    def on_epoch_begin(self, epoch=None, logs=None):
        self.steps = self.params.get("steps")
        self.epoch = epoch

    def _scalars(self, logs, mode):
        out = {}
        for k in getattr(self, f"{mode}_metrics"):
            if k in (logs or {}):
                v = _monitored(logs, k)
                if v is not None:
                    out[f"{mode}/{k}"] = float(v)
        return out

    def on_train_batch_end(self, step, logs=None):
        self.train_step += 1
        if self._is_write():
            self._write(self._scalars(logs, "train"), "train", self.train_step)

    def on_eval_begin(self, logs=None):
        logs = logs or {}
        self.eval_steps = logs.get("steps")
        self.eval_metrics = logs.get("metrics", [])
        self.eval_step = 0
        self.evaled_samples = 0

    def on_eval_end(self, logs=None):
        if self._is_write():
            self._write(self._scalars(logs, "eval"), "eval", getattr(self, "epoch", 0))
            if not hasattr(self, "_is_fit"):
                self._close()

    def on_train_end(self, logs=None):
        if self._is_write():
            self._close()


class VisualDL(_ScalarWriter):
    """Writes the training and evaluation values to VisualDL logs in ``log_dir``
    (needs the ``visualdl`` package: ``pip install visualdl``)."""

    def __init__(self, log_dir):
        super().__init__()
        self.log_dir = log_dir
        self.epochs = None
        self.steps = None
        self.epoch = 0

    def _write(self, scalars, mode, step):
        if not hasattr(self, "writer"):
            try:
                import visualdl
            except ImportError:
                raise ImportError("ddg.callbacks.VisualDL needs the visualdl package (pip install visualdl)") \
                    from None
            self.writer = visualdl.LogWriter(self.log_dir)
        for tag, value in scalars.items():
            self.writer.add_scalar(tag=tag, step=step, value=value)

    def _close(self):
        if hasattr(self, "writer"):
            self.writer.close()
            del self.writer


class WandbCallback(_ScalarWriter):
    """Logs the training and evaluation values to Weights & Biases (needs the
    ``wandb`` package); the arguments go to ``wandb.init``."""

    def __init__(self, project=None, entity=None, name=None, dir=None, mode=None, job_type=None, **kwargs):
        super().__init__()
        try:
            import wandb
        except ImportError:
            raise ImportError("ddg.callbacks.WandbCallback needs the wandb package (pip install wandb)") from None
        self.wandb = wandb
        self.wandb_args = dict(project=project, name=name, entity=entity, dir=dir, mode=mode, job_type=job_type)
        self.wandb_args.update(kwargs)
        self._run = None
        _ = self.run

    @property
    def run(self):
        if self._is_write() and self._run is None:
            if self.wandb.run is not None:
                warnings.warn("There is a wandb run already in progress and newly created instances of "
                              "`WandbCallback` will reuse this run.")
                self._run = self.wandb.run
            else:
                self._run = self.wandb.init(**self.wandb_args)
        return self._run

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        if self._is_write():
            self.run.define_metric("train/step")
            self.run.define_metric("train/*", step_metric="train/step")
            self.run.define_metric("epoch")
            self.run.define_metric("eval/*", step_metric="epoch")

    def _write(self, scalars, mode, step):
        scalars = dict(scalars)
        scalars["train/step" if mode == "train" else "epoch"] = step
        self.run.log(scalars)

    def _close(self):
        if self._run is not None:
            self._run.finish()
