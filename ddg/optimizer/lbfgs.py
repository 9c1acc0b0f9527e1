"""L-BFGS: a quasi-Newton method that builds an inverse-Hessian estimate from the last
``history_size`` steps and gradient differences (two-loop recursion), with an optional
strong-Wolfe line search. ``step(closure)`` re-evaluates the loss as often as it needs:
``closure`` clears the gradients, computes the loss, calls ``backward()`` and returns it."""
from ..autograd import grad_mode
from ..tensor import backend
from ..tensor.tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to bounds."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square ** 0.5
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _dot(a, b):
    return float((a * b).sum())


def _strong_wolfe(obj, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions (bracket, then zoom)."""
    xp = backend.get_array_module(d)
    d_norm = float(xp.abs(d).max())
    f_new, g_new = obj(x, t, d)
    evals = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bf, bg = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = _dot(g_new, d)
        it += 1
    if it == max_ls:
        bracket, bf, bg = [0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low, high = (0, 1) if len(bf) == 1 or bf[0] <= bf[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bf[0], bgtd[0], bracket[1], bf[1], bgtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = _dot(g_new, d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bf[low]:
            bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new.copy(), gtd_new
            low, high = (0, 1) if bf[0] <= bf[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bf[high], bg[high], bgtd[high] = bracket[low], bf[low], bg[low], bgtd[low]
            bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new.copy(), gtd_new
    t = bracket[low]
    return bf[low], bg[low], t, evals


class LBFGS(Optimizer):
    def __init__(self, learning_rate=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None, parameters=None, weight_decay=None, grad_clip=None,
                 name=None):
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"ddg.optimizer.LBFGS: line_search_fn must be None or 'strong_wolfe', "
                             f"got {line_search_fn!r}")
        self._default_dict = {}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self.max_iter, self.max_eval = max_iter, max_eval if max_eval is not None else max_iter * 5 // 4
        self.tolerance_grad, self.tolerance_change = tolerance_grad, tolerance_change
        self.history_size, self.line_search_fn = history_size, line_search_fn
        self._lbfgs = {"func_evals": 0, "n_iter": 0}

    def _params(self):
        return [p for g in self._param_groups for p in g["params"] if not p.stop_gradient]

    def _flat_grad(self):
        params = self._params()
        xp = backend.get_array_module(params[0]._data)
        parts = []
        pairs = [(p, p._grad) for p in params]
        clip = self._param_groups[0].get("grad_clip")
        if clip is not None:
            pairs = clip([(p, g) for p, g in pairs if g is not None]) + [(p, g) for p, g in pairs if g is None]
            order = {id(p): g for p, g in pairs}
            pairs = [(p, order[id(p)]) for p in params]
        for p, g in pairs:
            if g is None:
                parts.append(xp.zeros(p._data.size, dtype=p._data.dtype))
            else:
                ga = g._data if isinstance(g, Tensor) else g
                ga = ga.reshape(-1).astype(p._data.dtype, copy=True)
                if self.regularization is not None and getattr(self.regularization, "coeff", 0):
                    scratch = xp.empty_like(ga)
                    self.regularization._add_to(xp, p._data.reshape(-1), ga, scratch)
                parts.append(ga)
        return xp.concatenate(parts)

    def _add(self, t, d):
        offset = 0
        for p in self._params():
            n = p._data.size
            p._data += (t * d[offset:offset + n]).reshape(p._data.shape).astype(p._data.dtype, copy=False)
            p._bump()
            offset += n

    def _snapshot(self):
        return [p._data.copy() for p in self._params()]

    def _restore(self, saved):
        for p, a in zip(self._params(), saved):
            p._data[...] = a
            p._bump()

    def step(self, closure=None):
        """One optimisation step of up to ``max_iter`` L-BFGS iterations; returns the loss
        ``closure`` gave first."""
        if closure is None:
            raise ValueError("ddg.optimizer.LBFGS.step: needs a closure that clears the gradients, computes the "
                             "loss, calls backward() and returns the loss")
        if not self._param_groups:
            raise ValueError("ddg.optimizer.LBFGS: built without parameters; pass parameters=model.parameters()")
        lr = float(self.get_lr())
        st = self._lbfgs

        def evaluate():
            with grad_mode.enable_grad():
                return closure()

        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        st["func_evals"] += 1
        flat_grad = self._flat_grad()
        xp = backend.get_array_module(flat_grad)
        if float(xp.abs(flat_grad).max()) <= self.tolerance_grad:
            return orig_loss
        d, t = st.get("d"), st.get("t")
        old_dirs, old_stps, ro = st.get("old_dirs", []), st.get("old_stps", []), st.get("ro", [])
        h_diag = st.get("H_diag", 1.0)
        prev_flat_grad, prev_loss = st.get("prev_flat_grad"), st.get("prev_loss")
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == self.history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                q = -flat_grad
                al = [0.0] * len(old_dirs)
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(xp.abs(flat_grad).sum())) * lr if st["n_iter"] == 1 else lr
            gtd = _dot(flat_grad, d)
            if gtd > -self.tolerance_change:
                break
            ls_evals = 0
            if self.line_search_fn == "strong_wolfe":
                x0 = self._snapshot()

                def obj(x, step, direction):
                    self._add(step, direction)
                    f = float(evaluate())
                    g = self._flat_grad()
                    self._restore(x)
                    return f, g
                loss, flat_grad, t, ls_evals = _strong_wolfe(obj, x0, t, d, loss, flat_grad, gtd,
                                                             tolerance_change=self.tolerance_change)
                self._add(t, d)
            else:
                self._add(t, d)
                if n_iter != self.max_iter:
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    ls_evals = 1
            current_evals += ls_evals
            st["func_evals"] += ls_evals
            if n_iter == self.max_iter or current_evals >= self.max_eval:
                break
            if float(xp.abs(flat_grad).max()) <= self.tolerance_grad:
                break
            if float(xp.abs(d * t).max()) <= self.tolerance_change:
                break
            if abs(loss - prev_loss) < self.tolerance_change:
                break
        st.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                  prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        raise NotImplementedError("ddg.optimizer.LBFGS: use step(closure); L-BFGS re-evaluates the loss")
