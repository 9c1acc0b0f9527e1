"""``ddg.regularizer``: weight-decay terms added to a parameter's gradient before the
optimizer's update (Paddle's coupled regularization).

``L2Decay(c)`` adds ``c * param`` and ``L1Decay(c)`` adds ``c * sign(param)``. A
regularizer set on a parameter (``ParamAttr(regularizer=...)``) wins over the one
given to the optimizer as ``weight_decay``.
"""

__all__ = ["L1Decay", "L2Decay", "WeightDecayRegularizer"]


class WeightDecayRegularizer:
    """Base class: ``coeff`` and how to add the decay term to a raw gradient array."""
    kind = None

    def __init__(self, coeff=0.0):
        coeff = float(coeff)
        if coeff < 0:
            raise ValueError(f"ddg.regularizer.{type(self).__name__}: coeff must be >= 0, got {coeff}")
        self._coeff = coeff

    @property
    def coeff(self):
        return self._coeff

    def _add_to(self, xp, p, g_out, scratch):
        """``g_out += decay_term(p)`` in place; ``scratch`` is a buffer shaped like ``p``."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(coeff={self._coeff})"

    __str__ = __repr__


class L2Decay(WeightDecayRegularizer):
    """``grad += coeff * param``."""
    kind = "l2"

    def _add_to(self, xp, p, g_out, scratch):
        xp.multiply(p, self._coeff, out=scratch)
        g_out += scratch


class L1Decay(WeightDecayRegularizer):
    """``grad += coeff * sign(param)``."""
    kind = "l1"

    def _add_to(self, xp, p, g_out, scratch):
        xp.sign(p, out=scratch)
        scratch *= self._coeff
        g_out += scratch


def _to_regularizer(value, where):
    """None, a float (L2 coefficient) or a regularizer -> a regularizer or None."""
    if value is None or isinstance(value, WeightDecayRegularizer):
        return value
    if isinstance(value, bool):
        raise TypeError(f"{where}: weight_decay must be a float or a ddg.regularizer.L1Decay/L2Decay, got a bool")
    if isinstance(value, (int, float)):
        return L2Decay(float(value)) if value else None
    raise TypeError(f"{where}: weight_decay must be a float or a ddg.regularizer.L1Decay/L2Decay, "
                    f"got {type(value).__name__}")
