"""Making replicas the same: check that every rank built the same model, and copy rank
0's parameters and buffers to the others."""
import numpy as np

from ..tensor import backend

__all__ = ["check_replicas", "broadcast_state", "broadcast_tensors"]


def _describe_model(layer):
    desc = [("param", n, tuple(p.shape), p.dtype.str, bool(p.trainable)) for n, p in layer.named_parameters()]
    desc += [("buffer", n, tuple(b.shape), b.dtype.str, True) for n, b in layer.named_buffers()]
    return desc


def _fmt(entry):
    if entry is None:
        return "nothing"
    kind, name, shape, dt, trainable = entry
    extra = "" if trainable else " (not trainable)"
    return f"{kind} {name!r} {np.dtype(dt).name}{list(shape)}{extra}"


def check_replicas(comm, layer):
    """Every rank must hold the same parameters and buffers (names, shapes, dtypes, order);
    raise ValueError on ALL ranks naming the first rank and entry that differ."""
    everyone = comm.allgather_object(_describe_model(layer))
    ref = everyone[0]
    for r, desc in enumerate(everyone[1:], start=1):
        if desc == ref:
            continue
        for i in range(max(len(ref), len(desc))):
            a = ref[i] if i < len(ref) else None
            b = desc[i] if i < len(desc) else None
            if a != b:
                raise ValueError(
                    f"ddg.DataParallel: the model differs across ranks: at position {i}, rank 0 has "
                    f"{_fmt(a)} but rank {r} has {_fmt(b)} (rank 0 has {len(ref)} parameters+buffers, "
                    f"rank {r} has {len(desc)}). Every rank must build the same model.")


def broadcast_state(comm, layer, root=0):
    """Overwrite every rank's parameters and buffers with rank ``root``'s."""
    broadcast_tensors(comm, list(layer.parameters()) + list(layer.buffers()), root)


def broadcast_tensors(comm, tensors, root=0):
    """Overwrite ``tensors`` (the same list, in the same order, on every rank) with rank
    ``root``'s values: one broadcast per dtype and device, through a flat buffer.

    Only a tensor whose values differ from root's is written (and its version bumped):
    a tensor that an op of the forward just run saved for backward (a fixed batch norm
    weight, statistics used as running statistics) is already equal on every rank and
    stays untouched, so that backward can still use it."""
    groups = {}
    for t in tensors:
        a = t._data
        if a.size:
            groups.setdefault((a.dtype.str, backend.device_id_of(a)), []).append(t)
    for ts in groups.values():
        xp = backend.get_array_module(ts[0]._data)
        flat = xp.concatenate([t._data.ravel() for t in ts])
        before = None if comm.rank == root else flat.copy()
        comm.broadcast(flat, root)
        if before is None or bool(xp.array_equal(flat, before)):
            continue                    # root, or a rank already equal to it: nothing to write
        at = 0
        for t in ts:
            n = t._data.size
            value = flat[at:at + n].reshape(t._data.shape)
            at += n
            if not bool(xp.array_equal(value, t._data)):
                t._data[...] = value
                t._bump()
