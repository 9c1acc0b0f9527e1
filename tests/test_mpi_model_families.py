"""DataParallel over model families, at any world size >= 2, against one process:

* conv + BatchNorm (fluid-style with ``act``, depthwise, squeeze-excitation, channel
  shuffle, channel-last and 1-D batch norms), conv + LayerNorm, a ViT-style
  transformer, an RNN;
* nets without BatchNorm and SyncBatchNorm-converted nets equal one process on the whole
  batch (the unconverted net) after 3 Momentum steps: float64 to 1e-12, float32 within
  a few times the model's own float32 rounding (one process in float32 vs float64);
* nets with plain BatchNorm equal one process that runs each rank's shard from the same
  statistics, averages the gradients and keeps shard 0's statistics (what DataParallel
  promises: rank 0's non-trainable state on every rank);
* every rank's full state_dict is bit-identical after training.

Also the non-trainable state's synchronisation itself (buffers, frozen parameters,
``broadcast_buffers=False``, uneven inputs under ``join``), SyncBatchNorm under
``to_static``, and a float16 (AMP O2) model with batch norms.

Assertions come after each test's last collective (results are gathered first), so a
failing rank does not leave the others waiting.
"""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.parallel import comm as C

pytestmark = pytest.mark.mpi(min_size=2)

BATCH, STEPS, CLASSES = 12, 3, 5


@pytest.fixture(scope="module")
def comm():
    c = C.get_world_communicator()
    assert isinstance(c, C.MPICommunicator), "tests must run under mpiexec with --with-mpi"
    return c


@pytest.fixture
def float64():
    ddg.set_default_dtype("float64")
    yield
    ddg.set_default_dtype("float32")


# ---------------------------------------------------------------------- the families
class ConvBN(nn.Layer):
    """Stem conv + fluid BatchNorm with act, depthwise conv + BatchNorm2D, squeeze-excitation,
    channel shuffle, grouped pointwise conv, a channel-last BatchNorm with act, a BatchNorm1D."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2D(3, 8, 3, padding=1, bias_attr=False)
        self.bn1 = nn.BatchNorm(8, act="relu")
        self.dw = nn.Conv2D(8, 8, 3, padding=1, groups=8, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(8, momentum=0.8)
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.se1 = nn.Conv2D(8, 4, 1)
        self.se2 = nn.Conv2D(4, 8, 1)
        self.shuffle = nn.ChannelShuffle(2)
        self.pw = nn.Conv2D(8, 8, 1, groups=2, bias_attr=False)
        self.bn3 = nn.BatchNorm(8, act="sigmoid", data_layout="NHWC")
        self.bn4 = nn.BatchNorm1D(8, weight_attr=False)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):
        h = self.bn1(self.stem(x))
        h = F.relu(self.bn2(self.dw(h)))
        h = h * F.sigmoid(self.se2(F.relu(self.se1(self.pool(h)))))
        h = self.pw(self.shuffle(h))
        h = self.bn3(h.transpose([0, 2, 3, 1]))
        return self.head(self.bn4(h.mean(axis=[1, 2])))


class ConvLN(nn.Layer):
    """A ConvNeXt-style block: patchify conv, depthwise conv, LayerNorm over channels
    (channel-last), pointwise MLP with GELU, residual."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2D(3, 8, 2, stride=2)
        self.dw = nn.Conv2D(8, 8, 3, padding=1, groups=8)
        self.norm = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):
        h = self.stem(x)
        y = self.norm(self.dw(h).transpose([0, 2, 3, 1]))
        y = self.fc2(F.gelu(self.fc1(y))).transpose([0, 3, 1, 2])
        return self.head((h + y).mean(axis=[2, 3]))


class ViT(nn.Layer):
    """Patch embedding, class token, position embedding, one pre-norm encoder layer."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2D(3, 16, 4, stride=4)
        self.cls = self.create_parameter([1, 1, 16], default_initializer=nn.initializer.Normal(std=0.1))
        self.pos = self.create_parameter([1, 5, 16], default_initializer=nn.initializer.Normal(std=0.1))
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, normalize_before=True)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose([0, 2, 1])
        cls = self.cls.expand([x.shape[0], 1, 16])
        h = self.encoder(ddg.concat([cls, p], axis=1) + self.pos)
        return self.head(self.norm(h[:, 0]))


class RNN(nn.Layer):
    """A GRU over the image's rows, then an LSTM, then a linear head on the last step."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(24, 12)
        self.lstm = nn.LSTM(12, 12)
        self.head = nn.Linear(12, CLASSES)

    def forward(self, x):
        seq = x.transpose([0, 2, 1, 3]).reshape([x.shape[0], 8, 24])
        h, _ = self.gru(seq)
        h, _ = self.lstm(h)
        return self.head(h[:, -1])


FAMILIES = {"conv_bn": ConvBN, "conv_ln": ConvLN, "vit": ViT, "rnn": RNN}


def build(name, sync=False):
    ddg.seed(7)
    model = FAMILIES[name]()
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def batches(dtype):
    rng = np.random.default_rng(11)
    xs = (rng.standard_normal((STEPS, BATCH, 3, 8, 8)) * 1.5 + 0.5).astype(dtype)
    ys = rng.integers(0, CLASSES, size=(STEPS, BATCH))
    return xs, ys


def shard(comm, r=None):
    r = comm.rank if r is None else r
    return slice(r * BATCH // comm.size, (r + 1) * BATCH // comm.size)


def loss_of(model, x, y):
    return F.cross_entropy(model(ddg.to_tensor(x)), ddg.to_tensor(y))


def momentum(model):
    return ddg.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=model.parameters())


def state(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def gather_ok(comm, ok, msg=""):
    """Every rank learns whether every rank passed (so all ranks fail together)."""
    oks = comm.allgather_object((bool(ok), msg))
    bad = [(r, m) for r, (o, m) in enumerate(oks) if not o]
    assert not bad, f"failed on ranks {bad}"


def identical_on_every_rank(comm, st):
    blob = b"".join(k.encode() + v.dtype.str.encode() + v.tobytes() for k, v in st.items())
    return all(b == blob for b in comm.allgather_object(blob))


def train_dp(comm, model, xs, ys, **dp_args):
    dp = ddg.DataParallel(model, **dp_args)
    opt = momentum(dp)
    sl = shard(comm)
    for s in range(STEPS):
        loss_of(dp, xs[s, sl], ys[s, sl]).backward()
        opt.step()
        opt.clear_grad()
    return dp


def train_whole_batch(model, xs, ys):
    opt = momentum(model)
    for s in range(STEPS):
        loss_of(model, xs[s], ys[s]).backward()
        opt.step()
        opt.clear_grad()
    return model


def train_shard_by_shard(comm, model, xs, ys):
    """One process doing what N ranks with plain BatchNorm do: each shard from the same
    statistics, gradients weighted by shard size, shard 0's statistics kept."""
    opt = momentum(model)
    stats = [p for p in model.parameters() if p.stop_gradient]
    for s in range(STEPS):
        start = [p.numpy().copy() for p in stats]
        kept = None
        for r in range(comm.size):
            for p, v in zip(stats, start):
                p.set_value(v)
            sl = shard(comm, r)
            (loss_of(model, xs[s, sl], ys[s, sl]) * ((sl.stop - sl.start) / BATCH)).backward()
            if r == 0:
                kept = [p.numpy().copy() for p in stats]
        for p, v in zip(stats, kept):
            p.set_value(v)
        opt.step()
        opt.clear_grad()
    return model


def worst(got, ref):
    """The largest difference relative to the entry's scale (its largest value, at least
    1e-3: a ViT's key bias gets a zero gradient and stays ~1e-17), over all state entries."""
    assert list(got) == list(ref)
    return max(float(np.abs(got[k].astype(np.float64) - ref[k]).max() / max(np.abs(ref[k]).max(), 1e-3))
               for k in ref)


# ---------------------------------------------------------------------- float64: to 1e-12
CASES = [("conv_bn", "sync"), ("conv_bn", "plain"), ("conv_ln", "plain"), ("vit", "plain"), ("rnn", "plain"),
         ("conv_ln", "sync")]


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_family_equals_one_process_float64(comm, float64, name, variant):
    xs, ys = batches(np.float64)
    dp = train_dp(comm, build(name, sync=variant == "sync"), xs, ys)
    if variant == "plain" and name == "conv_bn":
        ref = train_shard_by_shard(comm, build(name), xs, ys)
    else:
        ref = train_whole_batch(build(name), xs, ys)
    got = state(dp)
    err = worst(got, state(ref))
    same = identical_on_every_rank(comm, got)
    gather_ok(comm, err < 1e-12 and same, f"{name}-{variant}: relative difference {err:.3g}, "
                                          f"state_dict identical on every rank: {same}")


def test_plain_batch_norm_differs_from_whole_batch(comm, float64):
    # the reference above is needed: plain BatchNorm on N ranks is NOT one process on the
    # whole batch (local statistics), which is what SyncBatchNorm is for
    xs, ys = batches(np.float64)
    err = worst(state(train_dp(comm, build("conv_bn"), xs, ys)), state(train_whole_batch(build("conv_bn"), xs, ys)))
    gather_ok(comm, err > 1e-6, f"plain BatchNorm matched the whole batch ({err:.3g})")


# ---------------------------------------------------------------------- float32: rounding noise
@pytest.mark.parametrize("name,variant", [("conv_bn", "sync"), ("vit", "plain"), ("rnn", "plain")])
def test_family_float32_within_rounding(comm, name, variant):
    xs, ys = batches(np.float64)
    ddg.set_default_dtype("float64")
    try:
        exact = state(train_whole_batch(build(name), xs, ys))
    finally:
        ddg.set_default_dtype("float32")
    x32 = xs.astype(np.float32)
    one = state(train_whole_batch(build(name), x32, ys))
    dp = state(train_dp(comm, build(name, sync=variant == "sync"), x32, ys))
    noise, err = worst(one, exact), worst(dp, exact)
    same = identical_on_every_rank(comm, dp)
    gather_ok(comm, err <= 10 * noise + 1e-6 and same,
              f"{name}-{variant}: float32 data-parallel error {err:.3g}, one-process float32 error {noise:.3g}, "
              f"identical {same}")


# ---------------------------------------------------------------------- the state broadcast
class WithState(nn.Layer):
    """A BatchNorm, a buffer counting forwards and a frozen parameter."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1D(4)
        self.frozen = self.create_parameter([4])
        self.frozen.stop_gradient = True
        self.register_buffer("seen", ddg.zeros([1], dtype="int64"))

    def forward(self, x):
        self.seen.set_value(self.seen + x.shape[0])
        return self.bn(self.fc(x)) + self.frozen


def test_non_trainable_state_is_rank_zeros_after_every_step(comm):
    ddg.seed(1)
    dp = ddg.DataParallel(WithState())
    opt = momentum(dp)
    rng = np.random.default_rng(comm.rank)          # every rank its own data
    ok, msg = True, ""
    for s in range(3):
        if comm.rank == 1:                          # a local change of a frozen parameter
            dp._layers.frozen.set_value(np.full(4, 5.0, np.float32))
        rows = 3 + comm.rank
        loss = dp(ddg.to_tensor(rng.standard_normal((rows, 4)).astype(np.float32))).sum()
        st = state(dp)
        same = identical_on_every_rank(comm, st)
        ok &= same and int(st["seen"][0]) == 3 * (s + 1) and not np.any(st["frozen"] == 5.0)
        msg = msg or ("" if ok else f"step {s}: identical {same}, seen {st['seen']}, frozen {st['frozen']}")
        loss.backward()
        opt.step()
        opt.clear_grad()
    gather_ok(comm, ok, msg)


def test_broadcast_buffers_false_keeps_local_statistics(comm):
    ddg.seed(1)
    dp = ddg.DataParallel(WithState(), broadcast_buffers=False)
    rng = np.random.default_rng(comm.rank)
    dp(ddg.to_tensor(rng.standard_normal((4, 4)).astype(np.float32))).sum().backward()
    st = state(dp)
    trained = {k: v for k, v in st.items() if not k.startswith("bn._")}
    gather_ok(comm, identical_on_every_rank(comm, trained) and not identical_on_every_rank(comm, st),
              "broadcast_buffers=False: statistics should be local, parameters shared")


def test_join_with_batch_norm_ends_identical(comm):
    # Rank r trains 1 + r steps under join: the state broadcast after each forward comes
    # from the lowest rank still training; at the end every rank holds the same state.
    ddg.seed(2)
    dp = ddg.DataParallel(nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1D(6), nn.Linear(6, 2)))
    opt = momentum(dp)
    rng = np.random.default_rng(comm.rank)
    with dp.join():
        for _ in range(1 + comm.rank):
            dp(ddg.to_tensor(rng.standard_normal((4, 4)).astype(np.float32))).sum().backward()
            opt.step()
            opt.clear_grad()
    gather_ok(comm, identical_on_every_rank(comm, state(dp)), "state differs after join")


# ---------------------------------------------------------------------- audit: to_static, AMP
def test_sync_batch_norm_under_to_static_equals_eager(comm, float64):
    # the running statistics are updated with ops and set_value, so a replayed program
    # (the third call on) updates them as the eager layer does
    xs, _ = batches(np.float64)
    results = []
    for static in (False, True):
        ddg.seed(3)
        model = nn.SyncBatchNorm.convert_sync_batchnorm(
            nn.Sequential(nn.Conv2D(3, 4, 3, padding=1), nn.BatchNorm(4, act="relu")))
        run = ddg.jit.to_static(model) if static else model
        for s in range(STEPS + 1):
            y = run(ddg.to_tensor(xs[s % STEPS, shard(comm)]))
            (y * y).mean().backward()
        results.append(state(model))
    same = all(np.array_equal(results[0][k], results[1][k]) for k in results[0])
    gather_ok(comm, same, "to_static SyncBatchNorm differs from eager")


def test_amp_o2_model_with_batch_norms_stays_identical(comm):
    ddg.seed(4)
    model = nn.Sequential(nn.Conv2D(3, 4, 3, padding=1), nn.BatchNorm2D(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 64, CLASSES))
    opt = ddg.optimizer.Momentum(learning_rate=0.1, parameters=model.parameters(), multi_precision=True)
    model, opt = ddg.amp.decorate(model, opt, level="O2", dtype="float16")
    dp = ddg.DataParallel(model)
    xs, ys = batches(np.float32)
    for s in range(2):
        with ddg.amp.auto_cast(level="O2", dtype="float16"):
            loss = loss_of(dp, xs[s, shard(comm)], ys[s, shard(comm)])
        loss.backward()
        opt.step()
        opt.clear_grad()
    st = state(dp)
    dtypes_ok = st["1._mean"].dtype == np.float32 and st["0.weight"].dtype == np.float16
    gather_ok(comm, dtypes_ok and identical_on_every_rank(comm, st),
              f"O2: dtypes {[(k, v.dtype.name) for k, v in st.items()]}")


def test_sync_batch_norm_takes_a_distributed_group(comm):
    group = ddg.distributed.new_group(list(range(comm.size)))
    x = ddg.to_tensor(np.arange(8.0, dtype=np.float32).reshape(4, 2) + 10 * comm.rank)
    with_group, world = nn.SyncBatchNorm(2, group=group), nn.SyncBatchNorm(2)
    same = np.array_equal(with_group(x).numpy(), world(x).numpy())
    expected = 0.1 * (3.0 + 10 * (comm.size - 1) / 2 + np.array([0.0, 1.0]))
    ok = same and np.allclose(with_group._mean.numpy(), expected, rtol=1e-6)
    gather_ok(comm, ok, f"group: same output {same}, mean {with_group._mean.numpy()} vs {expected}")
