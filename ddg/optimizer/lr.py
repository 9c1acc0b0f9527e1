"""``ddg.optimizer.lr``: learning-rate schedules (Paddle 2.x semantics).

A scheduler holds ``last_epoch`` (how many times ``step()`` ran, starting from -1 and
stepped once at construction, so a fresh scheduler is at epoch 0) and ``last_lr``
(the value for that epoch). Calling it returns ``last_lr``. Pass a scheduler as an
optimizer's ``learning_rate``: the optimizer reads it at every ``step()``, and the user
advances it with ``scheduler.step()`` (per batch or per epoch, as they like).

``step(epoch)`` jumps to ``epoch``; schedules whose ``get_lr`` is recursive (cosine
annealing) use their closed form there.
"""
import math
import numbers

import numpy as np

__all__ = ["LRScheduler", "NoamDecay", "PiecewiseDecay", "NaturalExpDecay", "InverseTimeDecay",
           "PolynomialDecay", "LinearWarmup", "ExponentialDecay", "MultiStepDecay", "StepDecay",
           "LambdaDecay", "MultiplicativeDecay", "ReduceOnPlateau", "CosineAnnealingDecay", "OneCycleLR",
           "CyclicLR", "LinearLR", "CosineAnnealingWarmRestarts"]


def _number(value, what, owner):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"ddg.optimizer.lr.{owner}: {what} must be a real number, got {type(value).__name__}")
    return float(value)


def _to_float(value):
    """A Python float from a float, numpy scalar/array or Tensor of one element."""
    if hasattr(value, "_data"):
        value = value.numpy()
    arr = np.asarray(value)
    if arr.size != 1:
        raise ValueError(f"expected a single number, got an array of shape {list(arr.shape)}")
    return float(arr.reshape(-1)[0])


class LRScheduler:
    """Base class. Subclasses implement ``get_lr()`` from ``self.base_lr`` and
    ``self.last_epoch``."""

    def __init__(self, learning_rate=0.1, last_epoch=-1, verbose=False):
        name = type(self).__name__
        self.base_lr = _number(learning_rate, "learning_rate", name)
        if not (self.base_lr >= 0 and np.isfinite(self.base_lr)):
            raise ValueError(f"ddg.optimizer.lr.{name}: learning_rate must be a finite number >= 0, "
                             f"got {self.base_lr!r}")
        self.last_lr = self.base_lr
        if not isinstance(last_epoch, numbers.Integral) or isinstance(last_epoch, bool):
            raise TypeError(f"ddg.optimizer.lr.{name}: last_epoch must be an int, got {type(last_epoch).__name__}")
        self.last_epoch = int(last_epoch)
        self.verbose = verbose
        self.step()

    def __call__(self):
        """The current learning rate."""
        return self.last_lr

    def step(self, epoch=None):
        """Advance one epoch (or jump to ``epoch``) and recompute ``last_lr``."""
        if epoch is None:
            self.last_epoch += 1
            self.last_lr = self.get_lr()
        else:
            self.last_epoch = int(epoch)
            closed = getattr(self, "_get_closed_form_lr", None)
            self.last_lr = closed() if closed is not None else self.get_lr()
        if self.verbose:
            print(f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to {self.last_lr}.")

    def get_lr(self):  # pragma: no cover - abstract
        raise NotImplementedError(f"ddg.optimizer.lr.{type(self).__name__} must implement get_lr()")

    # -- state ------------------------------------------------------------------------
    def state_keys(self):
        """The attributes saved by ``state_dict`` (subclasses may extend ``self.keys``)."""
        self.keys = ["last_epoch", "last_lr"]

    def state_dict(self):
        self.state_keys()
        state = {}
        for key in self.keys:
            if key not in self.__dict__:
                continue
            value = self.__dict__[key]
            if hasattr(value, "_data"):  # a Tensor: store its number
                value = _to_float(value)
            state[key] = value
        return state

    def set_state_dict(self, state_dict):
        self.state_keys()
        for key in self.keys:
            if key in state_dict:
                value = state_dict[key]
                if hasattr(value, "_data") or isinstance(value, np.ndarray) or isinstance(value, np.generic):
                    value = _to_float(value)
                    if key == "last_epoch":
                        value = int(value)
                self.__dict__[key] = value
            else:
                raise KeyError(f"ddg.optimizer.lr.{type(self).__name__}.set_state_dict: "
                               f"the state has no {key!r} (it has {sorted(state_dict)})")

    set_dict = set_state_dict

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self.last_lr})"


class NoamDecay(LRScheduler):
    """``lr = learning_rate * d_model^-0.5 * min(epoch^-0.5, epoch * warmup_steps^-1.5)``
    (epoch 0 counts as 1 in the first term)."""

    def __init__(self, d_model, warmup_steps, learning_rate=1.0, last_epoch=-1, verbose=False):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(f"ddg.optimizer.lr.NoamDecay: d_model and warmup_steps must be > 0, "
                             f"got {d_model} and {warmup_steps}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        a = 1.0 if self.last_epoch == 0 else self.last_epoch ** -0.5
        b = self.warmup_steps ** -1.5 * self.last_epoch
        return self.base_lr * (self.d_model ** -0.5) * min(a, b)


class PiecewiseDecay(LRScheduler):
    """``values[i]`` while ``epoch < boundaries[i]``; ``values[-1]`` after the last boundary."""

    def __init__(self, boundaries, values, last_epoch=-1, verbose=False):
        boundaries, values = list(boundaries), list(values)
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"ddg.optimizer.lr.PiecewiseDecay: needs len(values) == len(boundaries) + 1, "
                             f"got {len(values)} values and {len(boundaries)} boundaries")
        if any(b1 >= b2 for b1, b2 in zip(boundaries, boundaries[1:])):
            raise ValueError(f"ddg.optimizer.lr.PiecewiseDecay: boundaries must increase, got {boundaries}")
        self.boundaries = boundaries
        self.values = [float(v) for v in values]
        super().__init__(self.values[0], last_epoch, verbose)

    def get_lr(self):
        for boundary, value in zip(self.boundaries, self.values):
            if self.last_epoch < boundary:
                return value
        return self.values[-1]


class NaturalExpDecay(LRScheduler):
    """``lr = learning_rate * exp(-gamma * epoch)``."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _number(gamma, "gamma", "NaturalExpDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * math.exp(-self.gamma * self.last_epoch)


class InverseTimeDecay(LRScheduler):
    """``lr = learning_rate / (1 + gamma * epoch)``."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _number(gamma, "gamma", "InverseTimeDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr / (1 + self.gamma * self.last_epoch)


class PolynomialDecay(LRScheduler):
    """``(learning_rate - end_lr) * (1 - epoch / decay_steps)^power + end_lr``; with
    ``cycle`` the decay span grows to the next multiple of ``decay_steps`` instead of
    holding ``end_lr``."""

    def __init__(self, learning_rate, decay_steps, end_lr=0.0001, power=1.0, cycle=False, last_epoch=-1,
                 verbose=False):
        if not isinstance(decay_steps, numbers.Integral) or decay_steps <= 0:
            raise ValueError(f"ddg.optimizer.lr.PolynomialDecay: decay_steps must be a positive int, got {decay_steps!r}")
        self.decay_steps = int(decay_steps)
        self.end_lr = _number(end_lr, "end_lr", "PolynomialDecay")
        self.power = _number(power, "power", "PolynomialDecay")
        self.cycle = bool(cycle)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        epoch, span = self.last_epoch, self.decay_steps
        if self.cycle:
            span = self.decay_steps * max(1, math.ceil(epoch / self.decay_steps))
        else:
            epoch = min(epoch, self.decay_steps)
        return (self.base_lr - self.end_lr) * ((1 - epoch / span) ** self.power) + self.end_lr


class LinearWarmup(LRScheduler):
    """Linear ramp from ``start_lr`` to ``end_lr`` over ``warmup_steps``, then
    ``learning_rate`` (a float, or a scheduler that is stepped to
    ``epoch - warmup_steps``)."""

    def __init__(self, learning_rate, warmup_steps, start_lr, end_lr, last_epoch=-1, verbose=False):
        if not isinstance(learning_rate, (LRScheduler, numbers.Real)) or isinstance(learning_rate, bool):
            raise TypeError(f"ddg.optimizer.lr.LinearWarmup: learning_rate must be a float or an LRScheduler, "
                            f"got {type(learning_rate).__name__}")
        if not isinstance(warmup_steps, numbers.Integral) or warmup_steps <= 0:
            raise ValueError(f"ddg.optimizer.lr.LinearWarmup: warmup_steps must be a positive int, got {warmup_steps!r}")
        self.learning_rate = learning_rate if isinstance(learning_rate, LRScheduler) else float(learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.start_lr = _number(start_lr, "start_lr", "LinearWarmup")
        self.end_lr = _number(end_lr, "end_lr", "LinearWarmup")
        if self.end_lr < self.start_lr:
            raise ValueError(f"ddg.optimizer.lr.LinearWarmup: end_lr ({end_lr}) must be >= start_lr ({start_lr})")
        super().__init__(self.start_lr, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch < self.warmup_steps:
            return (self.end_lr - self.start_lr) * self.last_epoch / self.warmup_steps + self.start_lr
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate.step(self.last_epoch - self.warmup_steps)
            return self.learning_rate()
        return self.learning_rate

    def state_dict(self):
        state = super().state_dict()
        if isinstance(self.learning_rate, LRScheduler):
            state["LinearWarmup_LR"] = self.learning_rate.state_dict()
        return state

    def set_state_dict(self, state_dict):
        super().set_state_dict(state_dict)
        if isinstance(self.learning_rate, LRScheduler) and "LinearWarmup_LR" in state_dict:
            self.learning_rate.set_state_dict(state_dict["LinearWarmup_LR"])

    set_dict = set_state_dict


class ExponentialDecay(LRScheduler):
    """``lr = learning_rate * gamma^epoch``."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _number(gamma, "gamma", "ExponentialDecay")
        if self.gamma <= 0.0:
            raise ValueError(f"ddg.optimizer.lr.ExponentialDecay: gamma must be > 0, got {gamma}")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** self.last_epoch


class MultiStepDecay(LRScheduler):
    """``lr = learning_rate * gamma^k`` where ``k`` milestones have been passed."""

    def __init__(self, learning_rate, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(milestones, (list, tuple)):
            raise TypeError(f"ddg.optimizer.lr.MultiStepDecay: milestones must be a list or tuple, "
                            f"got {type(milestones).__name__}")
        if any(a >= b for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"ddg.optimizer.lr.MultiStepDecay: milestones must increase, got {list(milestones)}")
        self.gamma = _number(gamma, "gamma", "MultiStepDecay")
        if self.gamma >= 1.0:
            raise ValueError(f"ddg.optimizer.lr.MultiStepDecay: gamma must be < 1.0, got {gamma}")
        self.milestones = list(milestones)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        passed = sum(1 for m in self.milestones if self.last_epoch >= m)
        return self.base_lr * self.gamma ** passed


class StepDecay(LRScheduler):
    """``lr = learning_rate * gamma^(epoch // step_size)``."""

    def __init__(self, learning_rate, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(step_size, numbers.Integral) or step_size <= 0:
            raise ValueError(f"ddg.optimizer.lr.StepDecay: step_size must be a positive int, got {step_size!r}")
        self.gamma = _number(gamma, "gamma", "StepDecay")
        if self.gamma >= 1.0:
            raise ValueError(f"ddg.optimizer.lr.StepDecay: gamma must be < 1.0, got {gamma}")
        self.step_size = int(step_size)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class LambdaDecay(LRScheduler):
    """``lr = learning_rate * lr_lambda(epoch)``."""

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        if not callable(lr_lambda):
            raise TypeError(f"ddg.optimizer.lr.LambdaDecay: lr_lambda must be callable, got {type(lr_lambda).__name__}")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.lr_lambda(self.last_epoch)


class MultiplicativeDecay(LRScheduler):
    """``lr = learning_rate * lr_lambda(1) * ... * lr_lambda(last_epoch)``.

    ``get_lr()`` is a pure function of ``last_epoch`` (as in Paddle), so calling it
    again, or ``step(epoch)`` to jump, never applies a factor twice."""

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        if not callable(lr_lambda):
            raise TypeError(f"ddg.optimizer.lr.MultiplicativeDecay: lr_lambda must be callable, "
                            f"got {type(lr_lambda).__name__}")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        lr = self.base_lr
        for epoch in range(1, self.last_epoch + 1):
            lr = lr * self.lr_lambda(epoch)
        return lr


class CosineAnnealingDecay(LRScheduler):
    """Cosine annealing from ``learning_rate`` down to ``eta_min`` over ``T_max`` epochs
    (and back up, periodically). ``step()`` uses Paddle's recursive form, ``step(epoch)``
    the closed form ``eta_min + (lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    def __init__(self, learning_rate, T_max, eta_min=0, last_epoch=-1, verbose=False):
        if not isinstance(T_max, numbers.Integral) or T_max <= 0:
            raise ValueError(f"ddg.optimizer.lr.CosineAnnealingDecay: T_max must be a positive int, got {T_max!r}")
        self.T_max = int(T_max)
        self.eta_min = _number(eta_min, "eta_min", "CosineAnnealingDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        e, T = self.last_epoch, self.T_max
        if e == 0:
            return self.base_lr
        if (e - 1 - T) % (2 * T) == 0:
            return self.last_lr + (self.base_lr - self.eta_min) * (1 - math.cos(math.pi / T)) / 2
        return ((1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
                * (self.last_lr - self.eta_min) + self.eta_min)

    def _get_closed_form_lr(self):
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2


class LinearLR(LRScheduler):
    """``learning_rate`` times a factor that moves linearly from ``start_factor`` to
    ``end_factor`` over ``total_steps`` steps, then stays at ``end_factor``."""

    def __init__(self, learning_rate, total_steps, start_factor=1.0 / 3, end_factor=1.0, last_epoch=-1,
                 verbose=False):
        if not isinstance(total_steps, numbers.Integral) or total_steps <= 0:
            raise ValueError(f"ddg.optimizer.lr.LinearLR: total_steps must be a positive int, got {total_steps!r}")
        self.total_steps = int(total_steps)
        self.start_factor = _number(start_factor, "start_factor", "LinearLR")
        self.end_factor = _number(end_factor, "end_factor", "LinearLR")
        if not 0 < self.start_factor <= 1:
            raise ValueError(f"ddg.optimizer.lr.LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= self.end_factor <= 1:
            raise ValueError(f"ddg.optimizer.lr.LinearLR: end_factor must be in [0, 1], got {end_factor}")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        t = min(max(self.last_epoch, 0), self.total_steps) / self.total_steps
        return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t)


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from ``learning_rate`` to ``eta_min`` over cycles of ``T_0``,
    ``T_0 * T_mult``, ``T_0 * T_mult**2``... epochs, restarting at ``learning_rate``
    at the start of each cycle (SGDR)."""

    def __init__(self, learning_rate, T_0, T_mult=1, eta_min=0, last_epoch=-1, verbose=False):
        if not isinstance(T_0, numbers.Integral) or T_0 <= 0:
            raise ValueError(f"ddg.optimizer.lr.CosineAnnealingWarmRestarts: T_0 must be a positive int, got {T_0!r}")
        if not isinstance(T_mult, numbers.Integral) or T_mult < 1:
            raise ValueError(f"ddg.optimizer.lr.CosineAnnealingWarmRestarts: T_mult must be an int >= 1, "
                             f"got {T_mult!r}")
        self.T_0, self.T_mult = int(T_0), int(T_mult)
        self.eta_min = _number(eta_min, "eta_min", "CosineAnnealingWarmRestarts")
        super().__init__(learning_rate, last_epoch, verbose)

    def _cycle(self, epoch):
        """(epochs into the current cycle, length of the current cycle)."""
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        start = self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
        if start > epoch:  # guard against rounding in the log
            n -= 1
            start = self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
        length = self.T_0 * self.T_mult ** n
        if epoch - start >= length:
            start, length = start + length, length * self.T_mult
        return epoch - start, length

    def get_lr(self):
        t_cur, t_i = self._cycle(max(self.last_epoch, 0))
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2


class OneCycleLR(LRScheduler):
    """The one-cycle policy: from ``max_learning_rate / divide_factor`` up to
    ``max_learning_rate`` over ``phase_pct`` of ``total_steps``, then down to
    ``end_learning_rate`` (three phases: up, back down to the initial lr, then to the
    end lr). ``anneal_strategy`` is ``'cos'`` or ``'linear'``."""

    def __init__(self, max_learning_rate, total_steps, divide_factor=25.0, end_learning_rate=0.0001,
                 phase_pct=0.3, anneal_strategy="cos", three_phase=False, last_epoch=-1, verbose=False):
        max_lr = _number(max_learning_rate, "max_learning_rate", "OneCycleLR")
        end_lr = _number(end_learning_rate, "end_learning_rate", "OneCycleLR")
        if not isinstance(total_steps, numbers.Integral) or total_steps <= 0:
            raise ValueError(f"ddg.optimizer.lr.OneCycleLR: total_steps must be a positive int, got {total_steps!r}")
        if not 0 <= phase_pct <= 1:
            raise ValueError(f"ddg.optimizer.lr.OneCycleLR: phase_pct must be in [0, 1], got {phase_pct}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"ddg.optimizer.lr.OneCycleLR: anneal_strategy must be 'cos' or 'linear', "
                             f"got {anneal_strategy!r}")
        self.total_steps = int(total_steps)
        initial_lr = max_lr / float(divide_factor)
        up_end = float(phase_pct * self.total_steps) - 1
        if three_phase:
            down_end = float(2 * phase_pct * self.total_steps) - 2
            self._start_steps = [0, up_end, down_end, self.total_steps - 1]
            self._lr_config = [initial_lr, max_lr, initial_lr, end_lr]
        else:
            self._start_steps = [0, up_end, self.total_steps - 1]
            self._lr_config = [initial_lr, max_lr, end_lr]
        self._steps_size = [b - a for a, b in zip(self._start_steps, self._start_steps[1:])]
        self.anneal_strategy = anneal_strategy
        super().__init__(initial_lr, last_epoch, verbose)

    @staticmethod
    def _anneal(strategy, start, end, pct):
        if strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"ddg.optimizer.lr.OneCycleLR: stepped {step} times, more than total_steps="
                             f"{self.total_steps}")
        last = len(self._steps_size) - 1
        for i, (end_step, size) in enumerate(zip(self._start_steps[1:], self._steps_size)):
            if step <= end_step or i == last:
                pct = (step - self._start_steps[i]) / size if size else 1.0
                return self._anneal(self.anneal_strategy, self._lr_config[i], self._lr_config[i + 1], pct)
        return self._lr_config[-1]  # pragma: no cover


class CyclicLR(LRScheduler):
    """Cycles between ``base_learning_rate`` and ``max_learning_rate``:
    ``step_size_up`` steps up, ``step_size_down`` (default: same) steps down.
    ``mode``: 'triangular', 'triangular2' (amplitude halves each cycle) or 'exp_range'
    (amplitude times ``exp_gamma^epoch``); or a custom ``scale_fn(x)`` with
    ``scale_mode`` 'cycle' or 'iterations'."""

    def __init__(self, base_learning_rate, max_learning_rate, step_size_up, step_size_down=None,
                 mode="triangular", exp_gamma=1.0, scale_fn=None, scale_mode="cycle", last_epoch=-1, verbose=False):
        if step_size_up <= 0 or (step_size_down is not None and step_size_down <= 0):
            raise ValueError("ddg.optimizer.lr.CyclicLR: step sizes must be > 0")
        if scale_fn is None and mode not in ("triangular", "triangular2", "exp_range"):
            raise ValueError(f"ddg.optimizer.lr.CyclicLR: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range', got {mode!r}")
        self.max_lr = _number(max_learning_rate, "max_learning_rate", "CyclicLR")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.cycle_size = up + down
        self.step_up_pct = up / self.cycle_size
        self.mode, self.exp_gamma = mode, float(exp_gamma)
        if scale_fn is None:
            if mode == "triangular":
                self.scale_fn, self.scale_mode = (lambda x: 1.0), "cycle"
            elif mode == "triangular2":
                self.scale_fn, self.scale_mode = (lambda x: 1 / (2.0 ** (x - 1))), "cycle"
            else:
                self.scale_fn, self.scale_mode = (lambda x: self.exp_gamma ** x), "iterations"
        else:
            self.scale_fn, self.scale_mode = scale_fn, scale_mode
        super().__init__(base_learning_rate, last_epoch, verbose)

    def get_lr(self):
        it = self.last_epoch
        cycle = 1 + it // self.cycle_size
        pct = 1.0 + it / self.cycle_size - cycle
        x = pct / self.step_up_pct if pct <= self.step_up_pct else (pct - 1) / (self.step_up_pct - 1)
        amp = (self.max_lr - self.base_lr) * x
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else it)
        return self.base_lr + amp * scale


class ReduceOnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` when ``metrics`` (passed to ``step``) has not
    improved for more than ``patience`` epochs; after a reduction, ``cooldown`` epochs
    pass with the metric ignored. The lr never drops below ``min_lr``, and changes
    smaller than ``epsilon`` are not applied."""

    def __init__(self, learning_rate, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, epsilon=1e-8, verbose=False):
        mode, threshold_mode = str(mode).lower(), str(threshold_mode).lower()
        if mode not in ("min", "max"):
            raise ValueError(f"ddg.optimizer.lr.ReduceOnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ddg.optimizer.lr.ReduceOnPlateau: threshold_mode must be 'rel' or 'abs', "
                             f"got {threshold_mode!r}")
        if factor >= 1.0:
            raise ValueError(f"ddg.optimizer.lr.ReduceOnPlateau: factor must be < 1.0, got {factor}")
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor = float(factor)
        self.patience = int(patience)
        self.threshold = float(threshold)
        self.cooldown = int(cooldown)
        self.min_lr = float(min_lr)
        self.epsilon = float(epsilon)
        self.cooldown_counter = 0
        self.best = None
        self.num_bad_epochs = 0
        self.base_lr = _number(learning_rate, "learning_rate", "ReduceOnPlateau")
        self.last_lr = self.base_lr
        self.last_epoch = 0
        self.verbose = verbose

    def state_keys(self):
        self.keys = ["cooldown_counter", "best", "num_bad_epochs", "last_epoch", "last_lr"]

    def step(self, metrics, epoch=None):
        """One epoch with loss/metric ``metrics`` (a number or a one-element Tensor/array)."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        try:
            current = _to_float(metrics)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"ddg.optimizer.lr.ReduceOnPlateau.step: metrics must be a number or a one-element "
                            f"Tensor/array ({exc})") from None
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            return
        if self.best is None or self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.num_bad_epochs > self.patience:
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
            new_lr = max(self.last_lr * self.factor, self.min_lr)
            if self.last_lr - new_lr > self.epsilon:
                self.last_lr = new_lr
                if self.verbose:
                    print(f"Epoch {self.last_epoch}: ReduceOnPlateau set learning rate to {self.last_lr}.")

    def _is_better(self, current, best):
        if self.mode == "min":
            margin = best * self.threshold if self.threshold_mode == "rel" else self.threshold
            return current < best - margin
        margin = best * self.threshold if self.threshold_mode == "rel" else self.threshold
        return current > best + margin
