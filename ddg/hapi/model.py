"""``ddg.Model``: Paddle's high-level training API (``paddle.Model``).

``Model(network)`` wraps a Layer; ``prepare(optimizer, loss, metrics)`` says how to
train it; ``fit``, ``evaluate`` and ``predict`` run whole loops over a Dataset or a
DataLoader with callbacks (progress bar, checkpoints, learning-rate schedules, early
stopping); ``train_batch``, ``eval_batch`` and ``predict_batch`` run one step;
``save``/``load`` write and read ``path.pdparams`` and ``path.pdopt`` in ddg's safe
format (``save(path, training=False)`` writes an inference program through
``ddg.jit.save``).

Data parallelism needs no change to the program: launched as several MPI ranks
(``ddgrun -n 2 python train.py``), the Model wraps the network in
:class:`ddg.DataParallel`, ``fit``/``evaluate``/``predict`` shard a Dataset with a
:class:`ddg.io.DistributedBatchSampler`, and only rank 0 prints and writes files. The
metrics are global: in a loop over a loader sharded by a DistributedBatchSampler
(the ones these methods build, or yours), each step gathers the outputs and labels of
every rank before the metrics see them, dropping the samples that the sampler
repeated to even out the shards, and the logged loss is the mean over the ranks.
``predict`` returns every sample's outputs on every rank, in the sampler's order.
(Paddle's Model gathers for evaluation only and logs rank 0's own training values.)
A bare ``train_batch``/``eval_batch``/``predict_batch`` call works on this rank's
batch alone (the gradients are still averaged over the ranks).
"""
import inspect
import numbers
import os
import warnings

import numpy as np

from .. import amp as _amp
from ..autograd.grad_mode import no_grad
from ..io.dataloader import DataLoader
from ..io.dataset import Dataset, IterableDataset
from ..io import serialization
from ..metric.metrics import Metric
from ..nn.layer.layers import Layer
from ..parallel import env as _env
from ..parallel.comm import get_world_communicator
from ..parallel.data_parallel import DataParallel
from ..parallel.sampler import DistributedBatchSampler
from ..static import InputSpec
from ..tensor import backend
from ..tensor.creation import to_tensor
from ..tensor.tensor import Tensor
from .callbacks import EarlyStopping, ElasticCheckpoint, config_callbacks
from .model_summary import summary as _summary

__all__ = ["Model"]


def _elastic_wanted(environ=None):
    """Whether fit commits and resumes by itself: under ``ddgrun --max_restarts N`` (N > 0)
    or with ``DDG_ELASTIC_DIR`` set."""
    env = os.environ if environ is None else environ
    try:
        restarts = int(env.get("DDG_MAX_RESTARTS", "0") or 0)
    except ValueError:
        restarts = 0
    return restarts > 0 or bool(env.get("DDG_ELASTIC_DIR"))


def _to_list(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _flatten(data):
    """A flat list of the leaves of nested lists/tuples (a batch from a DataLoader)."""
    if isinstance(data, (list, tuple)):
        out = []
        for d in data:
            out.extend(_flatten(d))
        return out
    return [data]


def _as_tensor(x, what):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, backend.ARRAY_TYPES) or isinstance(x, (np.generic, numbers.Number, list)):
        return to_tensor(x)
    raise TypeError(f"ddg.Model: {what} must be Tensors or numpy arrays, got {type(x).__name__}")


def _numpy(t):
    return backend.to_host(t._data) if isinstance(t, Tensor) else np.asarray(t)


def _forward_arg_names(network):
    """Names of the positional arguments of ``network.forward`` (Paddle's default input
    names), or None when it takes ``*args``."""
    layer = network._layers if isinstance(network, DataParallel) else network
    try:
        sig = inspect.signature(layer.forward)
    except (TypeError, ValueError):
        return None
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            return None
    return names


def _check_specs(specs, what):
    out = []
    for i, s in enumerate(_to_list(specs)):
        if not isinstance(s, InputSpec):
            raise TypeError(f"ddg.Model: {what}[{i}] must be a ddg.static.InputSpec, got {type(s).__name__}")
        if s.name is None:
            raise ValueError(f"ddg.Model: {what}[{i}] needs a name (InputSpec(..., name='x')), got {s}")
        out.append(s)
    return out


class _Shard:
    """Where each step's batch of every rank sits in a DistributedBatchSampler's epoch, to
    gather the ranks' batches back into one (see ``Model._gather``). Built once per epoch
    (each rank's positions and the padding mask cost O(dataset) to work out); ``at(step)``
    points it at one step."""

    def __init__(self, sampler):
        self.nranks = sampler.num_replicas
        self.batch_size = sampler.batch_size
        epoch = getattr(sampler, "dealt_epoch", sampler.epoch)
        self._positions = [sampler.positions(r) for r in range(self.nranks)]
        self._padding = sampler.is_padding(epoch)
        self._first = 0

    def at(self, step):
        self._first = step * self.batch_size  # the batch's first sample in each rank's list
        return self

    def order(self, bs):
        """For rows gathered rank after rank (``bs`` from each): which to keep, in the
        sampler's order, leaving out the repeats the sampler padded with."""
        first = self._first
        pos = np.concatenate([p[first:first + bs] for p in self._positions])
        if pos.size != bs * self.nranks:
            raise RuntimeError("ddg.Model: the ranks' batches do not line up with the DistributedBatchSampler's "
                               "(a batch of {} rows, positions for {})".format(bs, pos.size))
        keep = np.flatnonzero(~self._padding[pos])
        return keep[np.argsort(pos[keep], kind="stable")]


def _sharding_sampler(loader, nranks, rank):
    """The loader's DistributedBatchSampler when it shards over this job's ranks."""
    bs = getattr(loader, "batch_sampler", None)
    if isinstance(bs, DistributedBatchSampler) and bs.num_replicas == nranks and bs.rank == rank and nranks > 1:
        return bs
    return None


class Model:
    """A network with its training set-up (Paddle's ``paddle.Model``).

    Args:
        network: the ``ddg.nn.Layer`` to train.
        inputs: ``ddg.static.InputSpec`` (or a list of them, each with a name)
            describing the network's inputs; needed by ``summary()`` without
            arguments and by ``save(path, training=False)``. Without it the first batch
            seen gives the shapes (batch dimension left free).
        labels: InputSpec(s) of the labels; only their number matters (how many of a
            batch's trailing fields are labels). Without it, a batch's fields beyond
            the network's positional arguments are the labels.
    """

    def __init__(self, network, inputs=None, labels=None):
        if not isinstance(network, Layer):
            raise TypeError(f"ddg.Model: network must be a ddg.nn.Layer, got {type(network).__name__}")
        self.mode = "train"
        self.network = network
        self._loss = None
        self._loss_weights = None
        self._optimizer = None
        self._amp_level = "O0"              # prepare(amp_configs=...): the auto_cast level,
        self._amp_custom_lists = {}         # its custom lists,
        self._amp_configs = {}              # and the GradScaler's arguments
        self._scaler = None
        self._metrics = []
        self._is_shape_inferred = False
        self._test_dataloader = None
        self._shard = None                  # set by _run_one_epoch while a sharded loader runs
        self._accumulate = 1
        self.stop_training = False
        self.num_iters = None               # fit's/evaluate's step budget (num_iters=)
        self._iters_mode = "train"          # the loop that spends it: evaluation inside fit does not
        self._last_count = None             # samples in the last gathered eval/predict step
        if isinstance(inputs, dict):
            names = _forward_arg_names(network) or list(inputs)
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ValueError(f"ddg.Model: inputs is a dict without {missing}, arguments of "
                                 f"{type(network).__name__}.forward")
            inputs = [inputs[n] for n in names]
        self._inputs = _check_specs(inputs, "inputs")
        self._labels = _check_specs(labels, "labels")
        self._inputs_given = bool(self._inputs)
        if not self._inputs:
            names = _forward_arg_names(network)
            self._n_inputs = len(names) if names else None     # None: every field but the labels
        else:
            self._n_inputs = len(self._inputs)
        self._nranks = _env.get_world_size()
        self._rank = _env.get_rank()
        self._ddp = None
        if self._nranks > 1:
            _env.init_parallel_env()
            self._ddp = network if isinstance(network, DataParallel) else DataParallel(network)

    # ------------------------------------------------------------------ set-up
    def prepare(self, optimizer=None, loss=None, metrics=None, amp_configs=None):
        """Set the optimizer, the loss (a Layer or any callable ``loss(*outputs,
        *labels)``) and the metrics (``ddg.metric.Metric`` objects) used by fit,
        evaluate and the ``*_batch`` methods."""
        if optimizer is not None and not (hasattr(optimizer, "step") and hasattr(optimizer, "state_dict")):
            raise TypeError(f"ddg.Model.prepare: optimizer must be a ddg.optimizer.Optimizer, "
                            f"got {type(optimizer).__name__}")
        self._optimizer = optimizer
        if loss is not None and not isinstance(loss, Layer) and not callable(loss):
            raise TypeError("ddg.Model.prepare: 'loss' must be a ddg.nn.Layer or a callable, "
                            f"got {type(loss).__name__}")
        self._loss = loss
        metrics = _to_list(metrics)
        for m in metrics:
            if not isinstance(m, Metric):
                raise TypeError(f"ddg.Model.prepare: {type(m).__name__} is not a subclass of ddg.metric.Metric")
        self._metrics = metrics
        self._prepare_amp(amp_configs)

    _AMP_SCALER_KEYS = ("init_loss_scaling", "incr_ratio", "decr_ratio", "incr_every_n_steps",
                        "decr_every_n_nan_or_inf", "use_dynamic_loss_scaling")

    def _prepare_amp(self, amp_configs):
        """Paddle's forms: None/'O0' (off), 'O1', 'O2', or a dict with 'level' (default
        'O1'), the auto_cast lists ('custom_white_list', 'custom_black_list') and the
        GradScaler's arguments. O2 decorates the network and optimizer (float16
        parameters, float32 master weights). Training steps run the forward under
        ``auto_cast`` and step through a GradScaler; evaluation and prediction run the
        forward under ``auto_cast`` at the same level."""
        self._amp_level, self._amp_custom_lists, self._amp_configs = "O0", {}, {}
        self._scaler = None
        if not amp_configs:
            return
        if isinstance(amp_configs, str):
            level, rest = amp_configs, {}
        elif isinstance(amp_configs, dict):
            rest = dict(amp_configs)
            level = rest.pop("level", "O1")
        else:
            raise TypeError(f"ddg.Model.prepare: amp_configs must be None, 'O0', 'O1', 'O2' or a dict, "
                            f"got {type(amp_configs).__name__}")
        if level not in ("O0", "O1", "O2"):
            raise ValueError(f"ddg.Model.prepare: the amp level must be 'O0', 'O1' or 'O2', got {level!r}")
        if level == "O0":
            return
        if "use_pure_fp16" in rest:
            raise ValueError("ddg.Model.prepare: 'use_pure_fp16' is not an amp_configs key; the level "
                             "('O1' or 'O2') decides")
        if rest.pop("use_fp16_guard", None):
            raise ValueError("ddg.Model.prepare: 'use_fp16_guard' applies to static graphs only")
        lists = {k: rest.pop(k) for k in ("custom_white_list", "custom_black_list") if k in rest}
        unknown = set(rest) - set(self._AMP_SCALER_KEYS)
        if unknown:
            raise ValueError(f"ddg.Model.prepare: amp_configs keys {sorted(unknown)} are not accepted (besides "
                             f"'level' and the custom lists: {', '.join(self._AMP_SCALER_KEYS)})")
        _amp.auto_cast(level=level, **lists)   # checks the lists now rather than at the first step
        self._amp_level, self._amp_custom_lists, self._amp_configs = level, lists, rest
        if level == "O2":
            if self._optimizer is not None:
                self.network, self._optimizer = _amp.decorate(self.network, self._optimizer, level="O2")
            else:
                self.network = _amp.decorate(self.network, level="O2")
            if self._ddp is not None:  # rebuild the buckets for the parameters' new dtype
                self._ddp = DataParallel(self.network)

    def _autocast(self):
        return _amp.auto_cast(enable=self._amp_level != "O0", level=self._amp_level if self._amp_level != "O0"
                              else "O1", **self._amp_custom_lists)

    def parameters(self, *args, **kwargs):
        """The network's parameters."""
        return self.network.parameters(*args, **kwargs)

    # ------------------------------------------------------------------ one step
    def _split_inputs(self, inputs, what):
        return [_as_tensor(x, what) for x in _to_list(inputs)]

    def _forward(self, inputs):
        net = self._ddp if self._ddp is not None else self.network
        return _to_list(net(*inputs))

    def _infer_inputs(self, inputs):
        """Input specs from the first batch when none were given (batch dimension free)."""
        if self._inputs:
            return
        names = _forward_arg_names(self.network) or []
        specs = []
        for i, t in enumerate(inputs):
            name = names[i] if i < len(names) else f"input_{i}"
            shape = [None] + list(t.shape[1:]) if t.ndim else []
            specs.append(InputSpec(shape, t.dtype, name))
        self._inputs = specs
        self._is_shape_inferred = True

    def _compute_loss(self, outputs, labels):
        if self._loss is None:
            raise RuntimeError("ddg.Model: no loss; call model.prepare(optimizer, loss, metrics) first")
        losses = _to_list(self._loss(*(outputs + labels)))
        if not losses or not all(isinstance(x, Tensor) for x in losses):
            raise TypeError("ddg.Model: the loss must return a Tensor or a list of Tensors")
        return losses

    def _update_metrics(self, outputs, labels):
        results = []
        for metric in self._metrics:
            outs = metric.compute(*(outputs + labels))
            results.append(metric.update(*[_numpy(m) for m in _to_list(outs)]))
        return results

    def _gather(self, tensors):
        """Every rank's rows of these batch-first tensors, in the sampler's order, without
        the samples the sampler repeated (see the module docstring)."""
        shard = self._shard
        comm = get_world_communicator()
        out = []
        for t in tensors:
            a = t._data
            if a.ndim == 0:
                raise ValueError("ddg.Model: under several ranks the network's outputs and the labels must have "
                                 "a batch dimension (they are gathered from every rank for the metrics); got a "
                                 "0-d tensor")
            xp = backend.get_array_module(a)
            bs = a.shape[0]
            g = comm.allgather(xp.ascontiguousarray(a))            # [nranks, bs, ...]
            g = g.reshape((bs * shard.nranks,) + a.shape[1:])      # rank after rank
            rows = shard.order(bs)
            if rows.size != g.shape[0] or (rows != np.arange(rows.size)).any():
                g = g[xp.asarray(rows)]
            out.append(Tensor._wrap(g))
        return out

    def _mean_over_ranks(self, losses):
        if self._shard is None:
            return losses
        vals = np.array([float(_numpy(l)) for l in losses], dtype=np.float64)
        get_world_communicator().allreduce(vals, "sum")
        return [Tensor._wrap(np.asarray(v / self._shard.nranks, dtype=np.float32)) for v in vals]

    def train_batch(self, inputs, labels=None, update=True):
        """One training step: forward, loss, backward and (if ``update``) an optimizer
        step. Returns the losses as numpy arrays, with the metrics' batch values when
        there are metrics: ``([loss], [metric values])``."""
        if self._optimizer is None:
            raise RuntimeError("ddg.Model.train_batch: no optimizer; call model.prepare(optimizer, loss) first")
        self.network.train()
        self.mode = "train"
        inputs = self._split_inputs(inputs, "inputs")
        labels = self._split_inputs(labels, "labels")
        self._infer_inputs(inputs)
        sync_off = self._ddp.no_sync() if (self._ddp is not None and not update) else None
        if sync_off is not None:
            sync_off.__enter__()
        amp = self._amp_level != "O0"
        if amp and self._scaler is None:
            self._scaler = _amp.GradScaler(**self._amp_configs)
        try:
            with self._autocast():
                outputs = self._forward(inputs)
            losses = self._compute_loss(outputs, labels)
            final = losses[0]
            for extra in losses[1:]:
                final = final + extra
            (self._scaler.scale(final) if amp else final).backward()
        finally:
            if sync_off is not None:
                sync_off.__exit__(None, None, None)
        if update:
            if amp:
                self._scaler.step(self._optimizer)
                self._scaler.update()
            else:
                self._optimizer.step()
            self.network.clear_gradients()
        outputs = [o.detach() for o in outputs]
        if self._shard is not None:
            losses = self._mean_over_ranks(losses)
            if self._metrics:
                outputs = self._gather(outputs)
                labels = self._gather(labels)
        metrics = self._update_metrics(outputs, labels)
        losses = [_numpy(l) for l in losses]
        return (losses, metrics) if metrics else losses

    def eval_batch(self, inputs, labels=None):
        """One evaluation step (no gradients). Returns ``([loss], [metric values])``, the
        losses alone without metrics, or the metric values alone without a loss."""
        with no_grad():
            self.network.eval()
            self.mode = "eval"
            inputs = self._split_inputs(inputs, "inputs")
            labels = self._split_inputs(labels, "labels")
            self._infer_inputs(inputs)
            with self._autocast():
                outputs = self._forward(inputs)
            losses = self._compute_loss(outputs, labels) if self._loss is not None else None
            if self._shard is not None:
                if losses is not None:
                    losses = self._mean_over_ranks(losses)
                outputs = self._gather(outputs)
                labels = self._gather(labels)
                self._last_count = int(outputs[0].shape[0]) if outputs else 0
            metrics = self._update_metrics(outputs, labels)
        if losses is not None:
            losses = [_numpy(l) for l in losses]
            return (losses, metrics) if metrics else losses
        return metrics

    def predict_batch(self, inputs):
        """The network's outputs on one batch, as a list of numpy arrays."""
        with no_grad():
            self.network.eval()
            self.mode = "test"
            inputs = self._split_inputs(inputs, "inputs")
            self._infer_inputs(inputs)
            with self._autocast():
                outputs = self._forward(inputs)
            if self._shard is not None:
                outputs = self._gather(outputs)
                self._last_count = int(outputs[0].shape[0]) if outputs else 0
        return [_numpy(o) for o in outputs]

    # ------------------------------------------------------------------ save / load
    def save(self, path, training=True):
        """Write ``path.pdparams`` (the network's state) and ``path.pdopt`` (the
        optimizer's, once it has any) on rank 0; with ``training=False``, an inference
        program through ``ddg.jit.save`` (``path.pdmodel`` + ``path.pdiparams``), which
        needs the input specs (``Model(net, inputs=...)``, or a batch seen before).

        Under several ranks, call it on every rank (as with Paddle's): rank 0 writes
        and the others wait for it, so the files are there when any rank returns."""
        if not isinstance(path, (str, os.PathLike)) or not os.path.basename(os.fspath(path)):
            raise ValueError(f"ddg.Model.save: path must look like 'dirname/file_prefix', got {path!r}")
        path = os.fspath(path)
        try:
            if self._rank == 0:
                if training:
                    self._save_training(path)
                else:
                    self._save_inference(path)
        finally:
            if self._nranks > 1:
                get_world_communicator().barrier()

    def _save_training(self, path):
        serialization.save(self.network.state_dict(), path + ".pdparams")
        if self._optimizer is not None:
            state = self._optimizer.state_dict()
            if state:
                serialization.save(state, path + ".pdopt")

    def _save_inference(self, path):
        from ..jit.serialize import save as jit_save
        if not self._inputs:
            raise RuntimeError("ddg.Model.save(training=False) needs the input shapes: pass "
                               "inputs=[ddg.static.InputSpec(...)] to ddg.Model, or run a batch first")
        if self._is_shape_inferred:
            warnings.warn(f"ddg.Model.save: 'inputs' was not given to ddg.Model, so the inference program "
                          f"takes the inputs of the first batch seen, any batch size: {self._inputs}")
        layer = self.network._layers if isinstance(self.network, DataParallel) else self.network
        jit_save(layer, path, input_spec=self._inputs)

    def load(self, path, skip_mismatch=False, reset_optimizer=False):
        """Read ``path.pdparams`` into the network and, unless ``reset_optimizer`` (or
        there is no such file), ``path.pdopt`` into the optimizer. A missing key or
        shape mismatch raises ValueError naming it; with ``skip_mismatch`` it is
        skipped with a warning (and the optimizer state is not loaded)."""
        path = os.fspath(path)
        base, ext = os.path.splitext(path)
        if ext in (".pdparams", ".pdopt", ".pdmodel"):
            path = base
        elif ext not in ("",) and not os.path.exists(path + ".pdparams"):
            raise ValueError(f"ddg.Model.load: unknown file suffix {ext!r} in {path!r} (give the path without "
                             f"suffix, or ending in .pdparams)")
        params_file = path + ".pdparams"
        if not os.path.exists(params_file):
            raise FileNotFoundError(f"ddg.Model.load: {params_file!r} not found (Model.save(path) writes "
                                    f"path.pdparams)")
        state = serialization.load(params_file)
        if not isinstance(state, dict):
            raise ValueError(f"ddg.Model.load: {params_file!r} does not hold a state dict")
        matched = {}
        for key, param in self.network.state_dict().items():
            value = state.get(key)
            problem = None
            if value is None:
                problem = f"{key} is not found in the providing file."
            else:
                shape = list(value.shape) if hasattr(value, "shape") else list(np.shape(value))
                if shape != list(param.shape):
                    problem = f"{key} receives a shape {shape}, but the expected shape is {list(param.shape)}."
            if problem is not None:
                if not skip_mismatch:
                    raise ValueError(f"ddg.Model.load: {problem}")
                warnings.warn(f"Skip loading for {key}. {problem}")
                reset_optimizer = True
                continue
            matched[key] = value
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # skipped keys were reported above
            self.network.set_state_dict(matched)
        opt_file = path + ".pdopt"
        if self._optimizer is not None and not reset_optimizer and os.path.exists(opt_file):
            opt_state = serialization.load(opt_file)
            if opt_state:
                self._optimizer.set_state_dict(opt_state)

    # ------------------------------------------------------------------ loops
    def _loader(self, data, batch_size, shuffle, drop_last, num_workers, what):
        if isinstance(data, DataLoader):
            return data
        if isinstance(data, IterableDataset):
            return DataLoader(data, batch_size=batch_size, drop_last=drop_last, num_workers=num_workers)
        if isinstance(data, Dataset) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")
                                         and not isinstance(data, (list, tuple, str))):
            sampler = DistributedBatchSampler(data, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last)
            return DataLoader(data, batch_sampler=sampler, num_workers=num_workers)
        if hasattr(data, "__iter__") and not isinstance(data, (list, tuple, str)):
            return data                               # any iterable of batches
        raise TypeError(f"ddg.Model: {what} must be a ddg.io.Dataset or a DataLoader, got {type(data).__name__}")

    @staticmethod
    def _len(loader):
        try:
            return len(loader)
        except TypeError:
            return None

    def _metrics_name(self):
        names = ["loss"] if self._loss else []
        for m in self._metrics:
            names.extend(_to_list(m.name()))
        return names

    def _reset_metrics(self):
        for m in self._metrics:
            m.reset()

    def _n_inputs_of(self, data):
        if self._n_inputs is not None:
            return self._n_inputs
        n = len(data) - len(self._labels) if self._labels else 1
        return max(n, 1)

    def _run_one_epoch(self, loader, callbacks, mode):
        logs = {}
        outputs = []
        steps = self._len(loader)
        sampler = _sharding_sampler(loader, self._nranks, self._rank)
        shard = None
        it = iter(loader)
        # a DataLoader resumed mid-epoch (ddg.distributed.elastic) starts past the batches seen
        first = loader.position_state()["position"] if isinstance(loader, DataLoader) and not loader._iterable else 0
        try:
            for step, data in enumerate(it, first):
                data = _flatten(data)
                if not data:
                    raise ValueError("ddg.Model: the data loader yielded an empty batch")
                batch_size = data[0].shape[0] if data[0].shape else 1
                callbacks.on_batch_begin(mode, step, logs)
                if sampler is not None and shard is None:  # after the first batch: the epoch is dealt
                    shard = _Shard(sampler)
                self._shard = shard.at(step) if shard is not None else None
                self._last_count = None
                n_in = self._n_inputs_of(data)
                if mode != "predict":
                    ins, labs = data[:n_in], data[n_in:]
                    if mode == "train":
                        update = (step + 1) % self._accumulate == 0 or (steps is not None and step + 1 == steps)
                        outs = self.train_batch(ins, labs, update)
                    else:
                        outs = self.eval_batch(ins, labs)
                    if self._metrics and self._loss:
                        values = [[float(np.asarray(l).reshape(-1)[0]) for l in outs[0]]]
                    elif self._loss:
                        values = [[float(np.asarray(l).reshape(-1)[0]) for l in outs]]
                    else:
                        values = []
                    for m in self._metrics:
                        values.extend(_to_list(m.accumulate()))
                    for k, v in zip(self._metrics_name(), values):
                        logs[k] = v
                else:
                    outputs.append(self.predict_batch(data[:n_in]))
                logs["step"] = step
                if mode != "train" and self._last_count is not None:
                    logs["batch_size"] = self._last_count
                else:
                    logs["batch_size"] = batch_size * self._nranks
                callbacks.on_batch_end(mode, step, logs)
                if self.num_iters is not None and mode == self._iters_mode:
                    self.num_iters -= 1
                    if self.num_iters <= 0:
                        self.stop_training = True
                        self.num_iters = None
                        break
        finally:
            self._shard = None
        self._reset_metrics()
        if mode == "predict":
            return logs, outputs
        return logs

    def fit(self, train_data=None, eval_data=None, batch_size=1, epochs=1, eval_freq=1, log_freq=10,
            save_dir=None, save_freq=1, verbose=2, drop_last=False, shuffle=True, num_workers=0,
            callbacks=None, accumulate_grad_batches=1, num_iters=None):
        """Train for ``epochs`` epochs (see Paddle's ``Model.fit``).

        ``train_data``/``eval_data``: a Dataset (batched here by a
        DistributedBatchSampler, shuffled unless ``shuffle=False``) or a DataLoader.
        ``batch_size``: an int, or ``[train, eval]``. Evaluates every ``eval_freq``
        epochs, prints every ``log_freq`` steps (``verbose`` 0, 1 or 2), saves to
        ``save_dir`` every ``save_freq`` epochs. ``accumulate_grad_batches``: steps
        whose gradients add up before each optimizer step. ``num_iters``: stop after
        this many steps. ``num_workers``: the DataLoader's worker processes."""
        if train_data is None:
            raise ValueError("ddg.Model.fit: train_data must be given")
        if isinstance(batch_size, (list, tuple)):
            if len(batch_size) != 2 or not all(isinstance(b, numbers.Integral) for b in batch_size):
                raise ValueError(f"ddg.Model.fit: batch_size must be an int or [train_batch_size, "
                                 f"eval_batch_size], got {batch_size!r}")
            train_bs, eval_bs = batch_size
        elif isinstance(batch_size, numbers.Integral):
            train_bs = eval_bs = batch_size
        else:
            raise TypeError(f"ddg.Model.fit: batch_size must be an int, got {type(batch_size).__name__}")
        for name, v in (("epochs", epochs), ("eval_freq", eval_freq), ("accumulate_grad_batches",
                                                                         accumulate_grad_batches)):
            if not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"ddg.Model.fit: {name} must be a positive int, got {v!r}")
        train_loader = self._loader(train_data, train_bs, shuffle, drop_last, num_workers, "train_data")
        eval_loader = None
        if eval_data is not None:
            eval_loader = self._loader(eval_data, eval_bs, False, False, num_workers, "eval_data")
        do_eval = eval_loader is not None
        self._test_dataloader = eval_loader
        self._accumulate = int(accumulate_grad_batches)
        self.stop_training = False
        steps = self._len(train_loader)
        self.num_iters = None
        if num_iters is not None:
            if not isinstance(num_iters, numbers.Integral) or num_iters < 1:
                raise ValueError(f"ddg.Model.fit: num_iters must be a positive int, got {num_iters!r}")
            self.num_iters = int(num_iters)
            self._iters_mode = "train"
            if steps is not None:
                epochs = num_iters // steps + 1
                steps = min(num_iters, steps)
        if _elastic_wanted() and not any(isinstance(c, ElasticCheckpoint) for c in _to_list(callbacks or [])):
            callbacks = _to_list(callbacks or []) + [ElasticCheckpoint()]
        cbks = config_callbacks(callbacks, model=self, epochs=epochs, steps=steps, log_freq=log_freq,
                                save_freq=save_freq, save_dir=save_dir, verbose=verbose,
                                metrics=self._metrics_name())
        if any(isinstance(c, EarlyStopping) for c in cbks) and not do_eval:
            warnings.warn("EarlyStopping needs validation data.")
        logs = {}
        self._train_dataloader = train_loader
        self._start_epoch = 0                 # an ElasticCheckpoint that resumes moves it on
        cbks.on_begin("train")
        for epoch in range(self._start_epoch, epochs):
            cbks.on_epoch_begin(epoch)
            logs = self._run_one_epoch(train_loader, cbks, "train")
            cbks.on_epoch_end(epoch, logs)
            if do_eval and epoch % eval_freq == 0:
                cbks.on_begin("eval", {"steps": self._len(eval_loader), "metrics": self._metrics_name()})
                eval_logs = self._run_one_epoch(eval_loader, cbks, "eval")
                cbks.on_end("eval", eval_logs)
            if self.stop_training:
                break
        cbks.on_end("train", logs)
        self._test_dataloader = self._train_dataloader = None

    def evaluate(self, eval_data, batch_size=1, log_freq=10, verbose=2, num_workers=0, callbacks=None,
                 num_iters=None):
        """Evaluate on ``eval_data`` (Dataset or DataLoader); returns ``{name: value}``
        for the loss (``[value]``, the last batch's) and each metric."""
        loader = self._loader(eval_data, batch_size, False, False, num_workers, "eval_data")
        self._test_dataloader = loader
        cbks = config_callbacks(callbacks, model=self, log_freq=log_freq, verbose=verbose,
                                metrics=self._metrics_name())
        steps = self._len(loader)
        self.num_iters = None
        if num_iters is not None:
            if not isinstance(num_iters, numbers.Integral) or num_iters < 1:
                raise ValueError(f"ddg.Model.evaluate: num_iters must be a positive int, got {num_iters!r}")
            steps = min(num_iters, steps) if steps is not None else num_iters
            self.num_iters = steps
            self._iters_mode = "eval"
        cbks.on_begin("eval", {"steps": steps, "metrics": self._metrics_name()})
        logs = self._run_one_epoch(loader, cbks, "eval")
        cbks.on_end("eval", logs)
        self._test_dataloader = None
        return {k: logs[k] for k in self._metrics_name() if k in logs}

    def predict(self, test_data, batch_size=1, num_workers=0, stack_outputs=False, verbose=1, callbacks=None):
        """The network's outputs on ``test_data``: one list per output, holding one
        array per batch, or (``stack_outputs=True``) one array of all samples."""
        loader = self._loader(test_data, batch_size, False, False, num_workers, "test_data")
        self._test_dataloader = loader
        cbks = config_callbacks(callbacks, model=self, verbose=verbose)
        self.num_iters = None
        cbks.on_begin("predict", {"steps": self._len(loader)})
        logs, outputs = self._run_one_epoch(loader, cbks, "predict")
        outputs = list(zip(*outputs))
        if stack_outputs:
            outputs = [np.vstack(outs) for outs in outputs]
        self._test_dataloader = None
        cbks.on_end("predict", logs)
        return outputs

    # ------------------------------------------------------------------ summary
    def summary(self, input_size=None, dtype=None):
        """Print the network's layers, shapes and parameter counts (``ddg.summary``) and
        return ``{'total_params', 'trainable_params'}``."""
        if input_size is None:
            if not self._inputs:
                raise ValueError("ddg.Model.summary: give input_size, or pass inputs= to ddg.Model")
            input_size = self._inputs
        return _summary(self.network, input_size, dtypes=dtype)
