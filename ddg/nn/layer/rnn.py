"""Recurrent layers with Paddle 2.x semantics: the cells ``SimpleRNNCell``, ``LSTMCell``,
``GRUCell``, the wrappers ``RNN`` / ``BiRNN`` and the multi-layer networks ``SimpleRNN``,
``LSTM``, ``GRU``.

The built-in cells run a whole sequence (one direction of one layer) as ONE op,
``ops.rnn.RNNSequence``: the input projection of all steps in one matmul, the time loop
and backpropagation through time inside the op (as cuDNN's RNN does); a cell called on
its own runs the same op over one step (an LSTM with ``proj_size`` too, its projection
inside the op). User-defined cells run step by step as a composite of ordinary ops (the
input projection still one matmul).

Parameter layouts follow Paddle: ``weight_ih`` ``[gates*hidden, input]``, ``weight_hh``
``[gates*hidden, hidden]``, ``bias_ih`` / ``bias_hh`` ``[gates*hidden]``; gate order
LSTM (i, f, g, o), GRU (r, z, c); everything initialised from
``Uniform(-1/sqrt(hidden), 1/sqrt(hidden))``. Like Paddle, a multi-layer network is a
``LayerList`` of ``RNN`` / ``BiRNN`` layers (state_dict keys ``0.cell.weight_ih``,
``0.cell_fw.weight_ih`` ...), and also exposes every parameter under its flat name
(``weight_ih_l0``, ``weight_hh_l0_reverse`` ...), so both spellings appear in
``state_dict()`` as they do in Paddle.

``sequence_length`` is supported by masking: past a sequence's length the state is
carried over unchanged and the output is zero (the final state is the state at the
last valid step; the reverse direction starts at the last valid step).
"""
import math

import numpy as np

from ...autograd.ops import elementwise as E
from ...autograd.ops import movement as M
from ...autograd.ops.rnn import RNNSequence
from ...tensor import backend
from ...tensor.tensor import Tensor
from .. import functional as F
from ..functional.common import require_float
from .. import initializer as I
from .container import LayerList
from .layers import Layer

_BIDIRECTIONAL = ("bidirect", "bidirectional")


# -- nested-structure helpers (states may be a Tensor or nested tuples/lists of them) ---------------------
def _map(fn, *structs):
    first = structs[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_map(fn, *parts) for parts in zip(*structs))
    return fn(*structs)


def _flatten(struct):
    if isinstance(struct, (tuple, list)):
        return [t for s in struct for t in _flatten(s)]
    return [struct]


def _check_tensor(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"ddg.nn.{op}: {what} must be a Tensor, got {type(x).__name__}")


# -- cells -----------------------------------------------------------------------------------------------
class RNNCellBase(Layer):
    """Base class of recurrent cells: ``cell(inputs, states) -> (outputs, new_states)``."""

    def get_initial_states(self, batch_ref, shape=None, dtype=None, init_value=0.0, batch_dim_idx=0):
        """Initial states filled with ``init_value``: for every shape in ``shape`` (default
        ``self.state_shape``, possibly nested) a tensor ``[batch, *shape]`` whose batch size
        is ``batch_ref.shape[batch_dim_idx]``."""
        ref = _flatten(batch_ref)[0]
        batch = ref.shape[batch_dim_idx]
        xp = backend.get_array_module(ref._data)
        if dtype is None:
            dtype = ref._data.dtype if ref._data.dtype.kind in "fV" else self._dtype
        shape = self.state_shape if shape is None else shape

        def build(s):
            if isinstance(s, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in s):
                dims = [int(d) for d in s]
                if dims and dims[0] == -1:  # Paddle lets -1 mark the batch position
                    dims = dims[1:]
                return Tensor._wrap(xp.full([batch] + dims, init_value, dtype=dtype))
            return type(s)(build(p) for p in s)

        return build(shape)

    @property
    def state_shape(self):
        raise NotImplementedError(f"{type(self).__name__} must define state_shape (or be given initial states)")

    @property
    def state_dtype(self):
        return self._dtype


class _FusedCell(RNNCellBase):
    """A built-in cell with separate input projection (``_project``, batched over all time
    steps by the RNN wrapper) and recurrent step (``_step``)."""
    _n_gates = 1
    _fold_hh_bias = True  # b_hh can be added up front (not for GRU, where r multiplies it)

    def _make_params(self, input_size, hidden_size, weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr,
                     hh_cols=None):
        if int(input_size) <= 0 or int(hidden_size) <= 0:
            raise ValueError(f"ddg.nn.{type(self).__name__}: input_size and hidden_size must be positive, got "
                             f"{input_size} and {hidden_size}")
        g = self._n_gates * hidden_size
        std = 1.0 / math.sqrt(hidden_size)
        init = I.Uniform(-std, std)

        # An attr of False means "no such parameter": as in Paddle, a fixed non-trainable
        # tensor takes its place (ones for weights, zeros for biases).
        def make(shape, attr, is_bias):
            if attr is False:
                p = self.create_parameter(shape, None, is_bias=is_bias,
                                          default_initializer=I.Constant(0.0 if is_bias else 1.0))
                p.stop_gradient = True
                return p
            return self.create_parameter(shape, attr, is_bias=is_bias, default_initializer=init)

        self.weight_ih = make([g, input_size], weight_ih_attr, False)
        self.weight_hh = make([g, hh_cols or hidden_size], weight_hh_attr, False)
        self.bias_ih = make([g], bias_ih_attr, True)
        self.bias_hh = make([g], bias_hh_attr, True)
        self.input_size, self.hidden_size = input_size, hidden_size

    def _project(self, inputs):
        """``inputs @ W_ih^T + b_ih`` (``+ b_hh`` where it can be folded), over any leading axes."""
        if inputs.shape[-1] != self.input_size:
            raise ValueError(f"ddg.nn.{type(self).__name__}: input has {inputs.shape[-1]} features (shape "
                             f"{inputs.shape}) but the cell expects input_size={self.input_size}")
        bias = self.bias_ih + self.bias_hh if self._fold_hh_bias else self.bias_ih
        return F.linear(inputs, M.transpose(self.weight_ih, [1, 0]), bias)

    def _context(self):
        """Per-call constants for ``_step``: ``W_hh^T`` is transposed once, not every step."""
        return M.transpose(self.weight_hh, [1, 0])

    def forward(self, inputs, states=None):
        _check_tensor(inputs, type(self).__name__)
        require_float(f"nn.{type(self).__name__}", inputs=inputs)
        if states is None:
            states = self.get_initial_states(inputs, self.state_shape)
        if self._seq_mode() is not None and inputs.ndim == 2:
            if inputs.shape[-1] != self.input_size:
                raise ValueError(f"ddg.nn.{type(self).__name__}: input has {inputs.shape[-1]} features (shape "
                                 f"{inputs.shape}) but the cell expects input_size={self.input_size}")
            _, new = self._sequence(M.unsqueeze(inputs, 0), states, True)
            return (new[0] if isinstance(new, tuple) else new), new
        return self._step(self._project(inputs), states, self._context())

    def _seq_mode(self):
        """The RNNSequence mode of this cell, or None where it runs step by step."""
        return None

    def _sequence(self, inputs, states, time_major, is_reverse=False, lengths=None):
        """The whole sequence through one RNNSequence op: ``(outputs, final_states)``."""
        flat = list(states) if isinstance(states, (tuple, list)) else [states]
        proj = getattr(self, "proj_size", 0) > 0
        outs = RNNSequence(self._seq_mode(), is_reverse, not time_major, lengths, proj)(
            inputs, *flat, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
            *((self.weight_ho,) if proj else ()))
        return outs[0], (tuple(outs[1:]) if len(outs) > 2 else outs[1])

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}"


class SimpleRNNCell(_FusedCell):
    """Elman cell: ``h = act(W_ih x + b_ih + W_hh h + b_hh)`` with ``act`` tanh or relu."""
    _n_gates = 1

    def __init__(self, input_size, hidden_size, activation="tanh", weight_ih_attr=None, weight_hh_attr=None,
                 bias_ih_attr=None, bias_hh_attr=None, name=None):
        super().__init__()
        if activation not in ("tanh", "relu"):
            raise ValueError(f"ddg.nn.SimpleRNNCell: activation must be 'tanh' or 'relu', got {activation!r}")
        self.activation = activation
        self._activation_fn = E.tanh if activation == "tanh" else E.relu
        self._make_params(input_size, hidden_size, weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr)

    def _step(self, xg, h, whh_t):
        h = self._activation_fn(xg + F.linear(h, whh_t))
        return h, h

    def _seq_mode(self):
        return "RNN_TANH" if self.activation == "tanh" else "RNN_RELU"

    @property
    def state_shape(self):
        return (self.hidden_size,)


class LSTMCell(_FusedCell):
    """LSTM cell, gates (i, f, g, o):
    ``c = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h = sigmoid(o) * tanh(c)``
    (then ``h @ weight_ho`` when ``proj_size > 0``). States are ``(h, c)``."""
    _n_gates = 4

    def __init__(self, input_size, hidden_size, weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None,
                 bias_hh_attr=None, proj_size=0, name=None):
        super().__init__()
        if proj_size < 0 or (proj_size and proj_size >= hidden_size):
            raise ValueError(f"ddg.nn.LSTMCell: proj_size must be in [0, hidden_size={hidden_size}), got "
                             f"{proj_size}")
        self._make_params(input_size, hidden_size, weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr,
                          hh_cols=proj_size or None)
        self.proj_size = proj_size
        self._gate_activation, self._activation = E.sigmoid, E.tanh
        if proj_size:
            std = 1.0 / math.sqrt(hidden_size)
            self.weight_ho = self.create_parameter([hidden_size, proj_size], weight_hh_attr,
                                                   default_initializer=I.Uniform(-std, std))

    def _seq_mode(self):
        return "LSTM"

    def _step(self, xg, states, whh_t):
        h, c = states
        gates = xg + F.linear(h, whh_t)
        i, f, g, o = M.split(gates, 4, axis=-1)
        gate, act = self._gate_activation, self._activation
        c = gate(f) * c + gate(i) * act(g)
        h = gate(o) * act(c)
        if self.proj_size:
            h = F.linear(h, self.weight_ho)
        return h, (h, c)

    @property
    def state_shape(self):
        return ((self.proj_size or self.hidden_size,), (self.hidden_size,))


class GRUCell(_FusedCell):
    """GRU cell, gates (r, z, c) as Paddle computes them:
    ``r, z = sigmoid(x_rz + h_rz)``, ``c = tanh(x_c + r * (W_hc h + b_hc))``,
    ``h = z * h + (1 - z) * c``."""
    _n_gates = 3
    _fold_hh_bias = False

    def __init__(self, input_size, hidden_size, weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None,
                 bias_hh_attr=None, name=None):
        super().__init__()
        self._make_params(input_size, hidden_size, weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr)
        self._gate_activation, self._activation = E.sigmoid, E.tanh

    def _seq_mode(self):
        return "GRU"

    def _step(self, xg, h, whh_t):
        H = self.hidden_size
        hg = F.linear(h, whh_t, self.bias_hh)
        x_rz, x_c = M.split(xg, [2 * H, H], axis=-1)
        h_rz, h_c = M.split(hg, [2 * H, H], axis=-1)
        r, z = M.split(self._gate_activation(x_rz + h_rz), 2, axis=-1)
        c = self._activation(x_c + r * h_c)
        h = (h - c) * z + c
        return h, h

    @property
    def state_shape(self):
        return (self.hidden_size,)


# -- running a cell over a sequence ----------------------------------------------------------------------
def _check_lengths(lens, steps):
    """Every sequence length in [0, steps] (Paddle 3.3.1 corrupted its heap on a length past
    the steps; a negative one meant nothing)."""
    if lens.size and (lens.min() < 0 or lens.max() > steps):
        raise ValueError(f"ddg.nn.RNN: sequence_length must lie in [0, {steps}] (the input's time steps), got "
                         f"values from {lens.min()} to {lens.max()}")


def _step_masks(sequence_length, steps, batch, like):
    """Per time step, ``(m, 1 - m)`` as ``[batch, 1]`` constants (1 where t < length)."""
    xp = backend.get_array_module(like._data)
    lens = sequence_length._data if isinstance(sequence_length, Tensor) else xp.asarray(sequence_length)
    lens = xp.asarray(lens).reshape(-1)
    if lens.shape[0] != batch:
        raise ValueError(f"ddg.nn.RNN: sequence_length has {lens.shape[0]} entries, the batch has {batch}")
    if xp is np:        # (on a GPU the check would be a synchronizing copy to the host)
        _check_lengths(lens, steps)
    keep = (xp.arange(steps)[None, :] < lens[:, None]).astype(like._data.dtype)  # [batch, steps]
    return [(Tensor._wrap(keep[:, t:t + 1]), Tensor._wrap(1 - keep[:, t:t + 1])) for t in range(steps)]


def _run(cell, inputs, initial_states=None, sequence_length=None, time_major=False, is_reverse=False, **kwargs):
    """Apply ``cell`` along the time axis of ``inputs``; returns ``(outputs, final_states)``."""
    _check_tensor(inputs, "RNN")
    if inputs.ndim != 3:
        raise ValueError(f"ddg.nn.RNN: inputs must be 3-D ([batch, time, feature], or [time, batch, feature] with "
                         f"time_major=True), got shape {inputs.shape}")
    t_axis, b_axis = (0, 1) if time_major else (1, 0)
    steps, batch = inputs.shape[t_axis], inputs.shape[b_axis]
    if steps == 0:
        raise ValueError(f"ddg.nn.RNN: inputs have no time steps (shape {inputs.shape})")
    if initial_states is None:
        initial_states = cell.get_initial_states(inputs, batch_dim_idx=b_axis)
    if isinstance(cell, _FusedCell):
        require_float(f"nn.{type(cell).__name__}", inputs=inputs)
    if isinstance(cell, _FusedCell) and not kwargs and cell._seq_mode() is not None:
        if inputs.shape[-1] != cell.input_size:
            raise ValueError(f"ddg.nn.{type(cell).__name__}: input has {inputs.shape[-1]} features (shape "
                             f"{inputs.shape}) but the cell expects input_size={cell.input_size}")
        lengths = None
        if sequence_length is not None:
            lengths = np.asarray(backend.to_host(sequence_length._data) if isinstance(sequence_length, Tensor)
                                 else sequence_length).reshape(-1)
            if lengths.shape[0] != batch:
                raise ValueError(f"ddg.nn.RNN: sequence_length has {lengths.shape[0]} entries, the batch has "
                                 f"{batch}")
            _check_lengths(lengths, steps)
        return cell._sequence(inputs, initial_states, time_major, is_reverse, lengths)
    if isinstance(cell, _FusedCell) and not kwargs:
        # one matmul for the input projection of every step, then one split along time
        xs = M.split(cell._project(inputs), steps, axis=t_axis)
        ctx = cell._context()

        def step(x, s):
            return cell._step(x, s, ctx)
    else:
        xs = M.split(inputs, steps, axis=t_axis)

        def step(x, s):
            return cell(x, s, **kwargs)
    masks = None if sequence_length is None else _step_masks(sequence_length, steps, batch, inputs)

    states = initial_states
    outs = [None] * steps
    for t in (range(steps - 1, -1, -1) if is_reverse else range(steps)):
        x = M.squeeze(xs[t], t_axis)
        out, new_states = step(x, states)
        if masks is not None:
            m, not_m = masks[t]
            new_states = _map(lambda n, o: n * m + o * not_m, new_states, states)
            out = out * m
        outs[t] = out
        states = new_states
    return M.stack(outs, axis=t_axis), states


class RNN(Layer):
    """Runs ``cell`` over a sequence: ``rnn(inputs, initial_states=None, sequence_length=None)``
    returns ``(outputs, final_states)``, outputs ``[batch, time, hidden]`` (time first with
    ``time_major=True``). ``is_reverse=True`` runs from the last step to the first."""

    def __init__(self, cell, is_reverse=False, time_major=False):
        super().__init__()
        if not isinstance(cell, Layer):
            raise TypeError(f"ddg.nn.RNN: cell must be a Layer (an RNNCellBase), got {type(cell).__name__}")
        self.cell = cell
        self.is_reverse, self.time_major = is_reverse, time_major

    def forward(self, inputs, initial_states=None, sequence_length=None, **kwargs):
        return _run(self.cell, inputs, initial_states, sequence_length, self.time_major, self.is_reverse, **kwargs)


class BiRNN(Layer):
    """A forward and a backward RNN over the same inputs, outputs concatenated on the last
    axis; ``initial_states`` and ``final_states`` are ``(states_fw, states_bw)``."""

    def __init__(self, cell_fw, cell_bw, time_major=False):
        super().__init__()
        self.cell_fw, self.cell_bw = cell_fw, cell_bw
        if getattr(cell_fw, "input_size", None) != getattr(cell_bw, "input_size", None):
            raise ValueError(f"ddg.nn.BiRNN: cell_fw and cell_bw need the same input_size, got "
                             f"{getattr(cell_fw, 'input_size', None)} and {getattr(cell_bw, 'input_size', None)}")
        self.time_major = time_major

    def forward(self, inputs, initial_states=None, sequence_length=None, **kwargs):
        if initial_states is None:
            init_fw = init_bw = None
        else:
            if not isinstance(initial_states, (tuple, list)) or len(initial_states) != 2:
                raise ValueError("ddg.nn.BiRNN: initial_states must be a pair (states_fw, states_bw)")
            init_fw, init_bw = initial_states
        out_fw, st_fw = _run(self.cell_fw, inputs, init_fw, sequence_length, self.time_major, False, **kwargs)
        out_bw, st_bw = _run(self.cell_bw, inputs, init_bw, sequence_length, self.time_major, True, **kwargs)
        return M.concat([out_fw, out_bw], axis=-1), (st_fw, st_bw)


# -- multi-layer networks --------------------------------------------------------------------------------
class RNNBase(LayerList):
    """``num_layers`` stacked RNN (or BiRNN) layers of one cell type.

    ``forward(inputs, initial_states=None, sequence_length=None)``: initial states are
    ``[num_layers * num_directions, batch, hidden]`` (a pair ``(h, c)`` of them for LSTM);
    returns ``(outputs, final_states)`` with final states shaped like the initial ones."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, direction="forward", time_major=False,
                 dropout=0.0, weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None,
                 activation="tanh", proj_size=0):
        super().__init__()
        name = {"LSTM": "LSTM", "GRU": "GRU"}.get(mode, "SimpleRNN")
        if direction not in ("forward",) + _BIDIRECTIONAL:
            raise ValueError(f"ddg.nn.{name}: direction must be 'forward' or 'bidirect' (or 'bidirectional'), "
                             f"got {direction!r}")
        if int(num_layers) < 1:
            raise ValueError(f"ddg.nn.{name}: num_layers must be >= 1, got {num_layers}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"ddg.nn.{name}: dropout must be in [0, 1), got {dropout}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"ddg.nn.{name}: proj_size is only supported by LSTM")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.dropout, self.time_major = int(num_layers), float(dropout), time_major
        self.num_directions = 2 if direction in _BIDIRECTIONAL else 1
        self.direction = direction
        self.state_components = 2 if mode == "LSTM" else 1
        self.proj_size = proj_size
        self._name = name

        kw = dict(weight_ih_attr=weight_ih_attr, weight_hh_attr=weight_hh_attr, bias_ih_attr=bias_ih_attr,
                  bias_hh_attr=bias_hh_attr)
        if mode == "LSTM":
            cls, kw["proj_size"] = LSTMCell, proj_size
        elif mode == "GRU":
            cls = GRUCell
        else:
            cls, kw["activation"] = SimpleRNNCell, activation
        out_size = proj_size or hidden_size
        for layer in range(self.num_layers):
            in_size = input_size if layer == 0 else out_size * self.num_directions
            if self.num_directions == 1:
                self.append(RNN(cls(in_size, hidden_size, **kw), False, time_major))
            else:
                self.append(BiRNN(cls(in_size, hidden_size, **kw), cls(in_size, hidden_size, **kw), time_major))

        # Paddle also exposes each cell's parameters on the network under flat names, and
        # lists them in _all_weights: every weight (layer by layer, direction by direction,
        # input-hidden then hidden-hidden), then every bias in the same order
        weights, biases = [], []
        for layer, rnn in enumerate(self):
            cells = [rnn.cell] if self.num_directions == 1 else [rnn.cell_fw, rnn.cell_bw]
            for d, cell in enumerate(cells):
                sfx = f"l{layer}" + ("_reverse" if d else "")
                self.add_parameter(f"weight_ih_{sfx}", cell.weight_ih)
                self.add_parameter(f"weight_hh_{sfx}", cell.weight_hh)
                weights += [cell.weight_ih, cell.weight_hh]
                if bias_ih_attr is not False:
                    self.add_parameter(f"bias_ih_{sfx}", cell.bias_ih)
                    biases.append(cell.bias_ih)
                if bias_hh_attr is not False:
                    self.add_parameter(f"bias_hh_{sfx}", cell.bias_hh)
                    biases.append(cell.bias_hh)
        self._all_weights = weights + biases

    def flatten_parameters(self):
        """Kept for Paddle compatibility (cuDNN weight packing); a no-op here."""

    def _split_states(self, states, batch, like):
        """``[L*D, B, H]`` tensors -> per layer: a state (or ``(fw, bw)`` pair of states)."""
        comps = list(states) if self.state_components == 2 else [states]
        if self.state_components == 2 and (not isinstance(states, (tuple, list)) or len(states) != 2):
            raise ValueError(f"ddg.nn.{self._name}: initial_states must be a pair (h0, c0)")
        n = self.num_layers * self.num_directions
        per_comp = []
        for k, s in enumerate(comps):
            _check_tensor(s, self._name, "initial state")
            size = (self.proj_size or self.hidden_size) if k == 0 else self.hidden_size
            if s.ndim != 3 or s.shape[0] != n or s.shape[1] != batch or s.shape[2] != size:
                raise ValueError(f"ddg.nn.{self._name}: initial state has shape {s.shape}, expected "
                                 f"[num_layers*num_directions={n}, batch={batch}, {size}]")
            per_comp.append([M.squeeze(p, 0) for p in M.split(s, n, axis=0)])
        flat = [tuple(c[i] for c in per_comp) if self.state_components == 2 else per_comp[0][i] for i in range(n)]
        if self.num_directions == 1:
            return flat
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(self.num_layers)]

    def _concat_states(self, finals):
        flat = []
        for st in finals:
            flat.extend(st if self.num_directions == 2 else [st])
        if self.state_components == 1:
            return M.stack(flat, axis=0)
        return tuple(M.stack([s[k] for s in flat], axis=0) for k in range(2))

    def forward(self, inputs, initial_states=None, sequence_length=None):
        _check_tensor(inputs, self._name)
        if inputs.ndim != 3 or inputs.shape[-1] != self.input_size:
            raise ValueError(f"ddg.nn.{self._name}: inputs must be [batch, time, {self.input_size}] "
                             f"({'time-major' if self.time_major else 'batch-major'}), got shape {inputs.shape}")
        require_float(f"nn.{self._name}", inputs=inputs)
        batch = inputs.shape[1 if self.time_major else 0]
        states = [None] * self.num_layers if initial_states is None else \
            self._split_states(initial_states, batch, inputs)
        finals = []
        x = inputs
        for i, layer in enumerate(self):
            if i > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True, mode="upscale_in_train")
            x, st = layer(x, states[i], sequence_length)
            finals.append(st)
        return x, self._concat_states(finals)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.num_directions == 2:
            s += f", direction={self.direction!r}"
        if self.time_major:
            s += ", time_major=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        return s


class SimpleRNN(RNNBase):
    """Multi-layer Elman RNN (tanh or relu)."""

    def __init__(self, input_size, hidden_size, num_layers=1, direction="forward", time_major=False, dropout=0.0,
                 activation="tanh", weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None,
                 name=None):
        mode = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}.get(activation)
        if mode is None:
            raise ValueError(f"ddg.nn.SimpleRNN: activation must be 'tanh' or 'relu', got {activation!r}")
        super().__init__(mode, input_size, hidden_size, num_layers, direction, time_major, dropout,
                         weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr, activation=activation)
        self.activation = activation


class LSTM(RNNBase):
    """Multi-layer LSTM; ``lstm(x, (h0, c0))`` -> ``(outputs, (h, c))``."""

    def __init__(self, input_size, hidden_size, num_layers=1, direction="forward", time_major=False, dropout=0.0,
                 weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None, proj_size=0,
                 name=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, direction, time_major, dropout,
                         weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr, proj_size=proj_size)


class GRU(RNNBase):
    """Multi-layer GRU; ``gru(x, h0)`` -> ``(outputs, h)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, direction="forward", time_major=False, dropout=0.0,
                 weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None, name=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, direction, time_major, dropout,
                         weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr)
