"""Places (devices). A Tensor's place follows from its array: numpy arrays live on
the CPU, cupy arrays on the GPU they were allocated on."""
import types

from . import backend


class Place:
    __slots__ = ("kind", "index")

    def __init__(self, kind, index=0):
        self.kind = kind
        self.index = index

    def is_cpu_place(self):
        return self.kind == "cpu"

    def is_gpu_place(self):
        return self.kind == "gpu"

    def gpu_device_id(self):
        return self.index

    def __eq__(self, other):
        if isinstance(other, str):
            other = parse_place(other)
        return isinstance(other, Place) and (self.kind, self.index if self.kind == "gpu" else 0) == \
            (other.kind, other.index if other.kind == "gpu" else 0)

    def __hash__(self):
        return hash((self.kind, self.index if self.kind == "gpu" else 0))

    def __str__(self):
        return "cpu" if self.kind == "cpu" else f"gpu:{self.index}"

    def __repr__(self):
        return f"Place({self})"

    # PyTorch spelling (torch.device('cpu').type), used by the PyTorch-style tutorial (acceptance program s002_torch_style.py)
    @property
    def type(self):
        return "cpu" if self.kind == "cpu" else "cuda"


def CPUPlace():
    return Place("cpu", 0)


def CUDAPlace(index=0):
    return Place("gpu", int(index))


_CPU = CPUPlace()
_current = [_CPU]
# This process's GPU: what 'gpu' / 'cuda' without an index means. init_parallel_env
# binds local_rank % n_gpus, set_device('gpu:N') picks N; default 0. Kept here, not
# read from cupy, because cupy's current device is per host thread (DataLoader
# workers would see device 0).
_gpu_index = [0]


def bind_gpu(index):
    """Make GPU ``index`` this process's GPU ('gpu' means it from now on) and current."""
    _gpu_index[0] = int(index)
    backend.cupy_module().cuda.Device(int(index)).use()
    if _current[0].kind == "gpu":
        _current[0] = CUDAPlace(int(index))


def parse_place(p):
    """A Place from a Place, 'cpu', 'gpu', 'gpu:1', 'cuda', 'cuda:0' or None (current)."""
    if p is None:
        return _current[0]
    if isinstance(p, Place):
        return p
    if isinstance(p, str):
        s = p.strip().lower()
        if s == "cpu":
            return _CPU
        kind, _, idx = s.partition(":")
        if kind in ("gpu", "cuda"):
            return CUDAPlace(int(idx) if idx else _gpu_index[0])
    raise ValueError(f"ddg: cannot understand place {p!r}; use 'cpu', 'gpu', 'gpu:N', CPUPlace() or CUDAPlace(N)")


def set_device(device):
    place = parse_place(device)
    if place.kind == "gpu":
        if not backend.cupy_available():
            raise ValueError(f"ddg.set_device({device!r}): CUDA is not available here (cupy missing or no GPU)")
        if place.index >= backend.cuda_device_count():
            raise ValueError(f"ddg.set_device({device!r}): only {backend.cuda_device_count()} GPU(s) visible")
        bind_gpu(place.index)
    _current[0] = place
    return place


def get_device():
    return str(_current[0])


def current_place():
    return _current[0]


def is_compiled_with_cuda():
    return backend.cupy_available()


def place_of(array):
    dev = backend.device_id_of(array)
    return _CPU if dev < 0 else CUDAPlace(dev)


def move_array(array, place):
    """``array`` on ``place`` (returned as is when already there)."""
    if place.kind == "cpu":
        return backend.to_host(array) if backend.is_gpu_array(array) else array
    if backend.device_id_of(array) == place.index:
        return array
    return backend.to_device(array, place.index)


class _DeviceModule(types.ModuleType):
    """``ddg.device`` is Paddle's module (set_device, get_device, ...) and also callable as
    PyTorch's ``torch.device('cpu')``, as PyTorch-style programs write it."""

    def __call__(self, spec="cpu", index=None):
        place = parse_place(spec)
        if index is not None and place.kind == "gpu":
            place = CUDAPlace(index)
        return place
