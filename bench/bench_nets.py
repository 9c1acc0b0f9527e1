"""Training-step time of conv, recurrent and transformer nets, ddg vs PyTorch CPU
eager, over a range of sizes, single-threaded, ratios from one interleaved run.

    python bench/bench_nets.py [--rounds 5] [--only resnet,lstm,gru,rnn,transformer,dcgan,mobilenet,gpt]
                               [--quick] [--batch 16]

``--only`` also takes ``mobilenetv2``, ``rnnstack`` and ``cells`` (not in the default list).
``--batch`` replaces the
batch of 16 of every class but GPT's (other batch sizes: a small batch stresses per-op and
per-call costs, a large one the caches).

One step = forward + loss + backward + optimizer step (SGD with momentum unless said
otherwise). Models:

* ``resnet``: conv3x3(3->C) BN ReLU, two basic blocks (conv3x3 BN ReLU conv3x3 BN, plus
  the identity, ReLU), a stride-2 basic block to 2C (1x1 stride-2 shortcut conv + BN),
  global average pool, Linear(2C, 10); batch 16, images HxH.
* ``lstm`` / ``gru`` / ``rnn``: 1-layer LSTM/GRU/SimpleRNN (tanh) (input 32, hidden H) over T steps, batch 16,
  Linear(H, 10) on the last output.
* ``rnnstack``: 2-layer LSTM/GRU (input 32, hidden H, one or both directions, LSTMs also
  with ``proj_size`` P) over T steps, batch 16, Linear on the last output.
* ``cells``: an LSTMCell / GRUCell / SimpleRNNCell (tanh) called step by step in a Python
  loop over T steps (input 32, hidden H, batch B of its own), Linear on the last state.
* ``transformer``: 2 post-norm encoder layers (d_model D, 4 heads, feed-forward 2D,
  no dropout), sequence S (10-200), batch 16, mean over the sequence, Linear(D, 10).
* ``dcgan``: DCGAN on HxH images (32 or 64), batch 16, latent 64, base width G. Generator:
  ConvTranspose 4x4 (1x1 -> 4x4) then ConvTranspose 4x4 stride 2 layers halving the width
  (each + BatchNorm + ReLU) up to ConvTranspose(G, 3) + Tanh. Discriminator: Conv 4x4
  stride 2 layers doubling the width from G (LeakyReLU(0.2), BatchNorm after the first),
  Conv 4x4 to one logit, Sigmoid, BCE loss. One step = a discriminator step on a real and
  a fake batch, then a generator step; Adam(2e-4, betas 0.5, 0.999) for each.
* ``mobilenet``: Conv3x3(3->C) BN ReLU6, then four depthwise-separable blocks (depthwise
  3x3 + BN + ReLU6, pointwise 1x1 + BN + ReLU6) to widths 2C, 4C (stride 2), 4C, 8C
  (stride 2), global average pool, Linear(8C, 10); batch 16, images HxH.
* ``mobilenetv2``: MobileNetV2-style inverted residual blocks at width multiplier A (channel
  counts scaled by A, rounded to multiples of 8): Conv3x3(3->32A) BN ReLU6, then blocks
  (expansion t, output width, stride) (1, 16, 1), (6, 24, 2), (6, 24, 1), (6, 32, 2),
  (6, 32, 1), (6, 64, 2), (6, 64, 1): expand 1x1 + BN + ReLU6 (t > 1), depthwise 3x3 at
  the stride + BN + ReLU6, project 1x1 + BN, plus the input where the stride is 1 and the
  widths match; then 1x1 to 256A + BN + ReLU6, global average pool, Linear(256A, 10);
  batch 16, images HxH.
* ``gpt``: GPT-style decoder: token + position embedding, dropout 0.1, L=2 pre-norm blocks
  (LayerNorm, causal 4-head attention through ``scaled_dot_product_attention``, output
  projection, dropout; LayerNorm, Linear(D, 4D), GELU, Linear(4D, D), dropout), final
  LayerNorm, LM head over a vocabulary V (tied to the token embedding or not),
  next-token cross-entropy over every position; batch 8, sequence S, AdamW(3e-4,
  weight decay 0.01).

Without torch only ddg's times are printed. Both frameworks get the same model shape
(each with its own initialisation), the same data and the same number of steps; each
size is raced on its own (alternating rounds, median step time), the step count set so
that a round of ddg steps takes about ``--round-time`` seconds.
"""
import argparse
import time

import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import race, try_torch

import numpy as np

import ddg
import ddg.nn.functional as F
from ddg import nn

BATCH = 16
RESNET_SIZES = [(16, 32), (32, 32), (64, 16), (128, 8), (256, 8), (16, 64)]
RNN_SIZES = [(64, 50), (128, 50), (256, 50), (512, 20), (1024, 10), (128, 10), (128, 200)]
TRANSFORMER_SIZES = [(64, 32), (128, 32), (256, 32), (512, 32), (1024, 32),   # (d, seq)
                     (128, 10), (64, 200), (128, 200)]
DCGAN_SIZES = [(16, 32), (32, 32), (64, 32), (16, 64), (32, 64)]        # (base width, image)
MOBILENET_SIZES = [(16, 32), (8, 64), (16, 64)]                         # (stem width, image)
MOBILENETV2_SIZES = [(0.5, 32), (1.0, 32), (0.5, 64), (0.75, 48)]        # (width multiplier, image)
GPT_SIZES = [(64, 64, 1000, True), (128, 128, 4000, False), (256, 128, 8000, True)]  # (d, seq, vocab, tied)
RNN_STACK_SIZES = [("lstm", 128, 50, False, 0), ("lstm", 256, 50, False, 0), ("lstm", 512, 50, False, 0),
                   ("lstm", 256, 50, True, 0), ("gru", 256, 50, False, 0), ("gru", 512, 30, True, 0),
                   ("lstm", 256, 50, False, 64), ("lstm", 512, 20, True, 128)]   # (kind, H, T, bidir, proj)
CELL_SIZES = [("lstm", 128, 20, 16), ("lstm", 512, 20, 16), ("lstm", 256, 50, 4), ("gru", 128, 20, 16),
              ("gru", 512, 20, 16), ("rnn", 128, 20, 16), ("rnn", 512, 20, 16)]     # (kind, H, T, batch)
GAN_LATENT = 64
GPT_BATCH = 8


# -- ResNet-style conv net ---------------------------------------------------------------------------
def _ddg_block(cin, cout, stride):
    conv1 = nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False)
    conv2 = nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False)
    bn1, bn2 = nn.BatchNorm2D(cout), nn.BatchNorm2D(cout)
    short = None
    if stride != 1 or cin != cout:
        short = nn.Sequential(nn.Conv2D(cin, cout, 1, stride, bias_attr=False), nn.BatchNorm2D(cout))

    class Block(nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.conv2, self.bn2, self.short = conv1, bn1, conv2, bn2, short

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.short is None else self.short(x)))
    return Block()


def ddg_resnet(c, hw):
    model = nn.Sequential(nn.Conv2D(3, c, 3, 1, 1, bias_attr=False), nn.BatchNorm2D(c), nn.ReLU(),
                          _ddg_block(c, c, 1), _ddg_block(c, c, 1), _ddg_block(c, 2 * c, 2),
                          nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(2 * c, 10))
    return model, (BATCH, 3, hw, hw)


def torch_resnet(torch, c, hw):
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn1, self.bn2 = tnn.BatchNorm2d(cout), tnn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.short is None else self.short(x)))

    return tnn.Sequential(tnn.Conv2d(3, c, 3, 1, 1, bias=False), tnn.BatchNorm2d(c), tnn.ReLU(),
                          Block(c, c, 1), Block(c, c, 1), Block(c, 2 * c, 2), tnn.AdaptiveAvgPool2d(1),
                          tnn.Flatten(), tnn.Linear(2 * c, 10))


# -- recurrent nets ------------------------------------------------------------------------------------
class _DdgRnnNet(nn.Layer):
    def __init__(self, kind, hidden, layers=1, bidir=False, proj=0):
        super().__init__()
        extra = {"proj_size": proj} if proj else {}
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.SimpleRNN}[kind](
            32, hidden, num_layers=layers, direction="bidirect" if bidir else "forward", **extra)
        self.fc = nn.Linear((proj or hidden) * (2 if bidir else 1), 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def torch_rnn(torch, kind, hidden, layers=1, bidir=False, proj=0):
    tnn = torch.nn

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            extra = {"proj_size": proj} if proj else {}
            self.rnn = {"lstm": tnn.LSTM, "gru": tnn.GRU, "rnn": tnn.RNN}[kind](
                32, hidden, num_layers=layers, bidirectional=bidir, batch_first=True, **extra)
            self.fc = tnn.Linear((proj or hidden) * (2 if bidir else 1), 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.fc(out[:, -1])
    return Net()


class _DdgCellLoop(nn.Layer):
    def __init__(self, kind, hidden):
        super().__init__()
        self.cell = {"lstm": nn.LSTMCell, "gru": nn.GRUCell, "rnn": nn.SimpleRNNCell}[kind](32, hidden)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):
        state = None
        for t in range(x.shape[1]):
            out, state = self.cell(x[:, t], state)
        return self.fc(out)


def torch_cell_loop(torch, kind, hidden):
    tnn = torch.nn

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.cell = {"lstm": tnn.LSTMCell, "gru": tnn.GRUCell, "rnn": tnn.RNNCell}[kind](32, hidden)
            self.fc = tnn.Linear(hidden, 10)

        def forward(self, x):
            state = None
            for t in range(x.shape[1]):
                state = self.cell(x[:, t], state)
            return self.fc(state[0] if kind == "lstm" else state)
    return Net()


# -- transformer encoder -------------------------------------------------------------------------------
class _DdgEncoder(nn.Layer):
    def __init__(self, d):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.fc = nn.Linear(d, 10)

    def forward(self, x):
        return self.fc(self.enc(x).mean(axis=1))


def torch_encoder(torch, d):
    tnn = torch.nn

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            layer = tnn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True)
            self.enc = tnn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.fc = tnn.Linear(d, 10)

        def forward(self, x):
            return self.fc(self.enc(x).mean(dim=1))
    return Net()


# -- DCGAN ---------------------------------------------------------------------------------------------
def _gan_widths(g, hw):
    """Generator widths from the 4x4 layer up: g * 2**k, halving at each 2x upsampling."""
    n_up = {32: 3, 64: 4}[hw]
    return [g * 2 ** k for k in range(n_up - 1, -1, -1)]


def ddg_dcgan(g, hw):
    w = _gan_widths(g, hw)
    gen = [nn.Conv2DTranspose(GAN_LATENT, w[0], 4, 1, 0, bias_attr=False), nn.BatchNorm2D(w[0]), nn.ReLU()]
    for a, b in zip(w, w[1:]):
        gen += [nn.Conv2DTranspose(a, b, 4, 2, 1, bias_attr=False), nn.BatchNorm2D(b), nn.ReLU()]
    gen += [nn.Conv2DTranspose(w[-1], 3, 4, 2, 1, bias_attr=False), nn.Tanh()]
    d = w[::-1]
    dis = [nn.Conv2D(3, d[0], 4, 2, 1, bias_attr=False), nn.LeakyReLU(0.2)]
    for a, b in zip(d, d[1:]):
        dis += [nn.Conv2D(a, b, 4, 2, 1, bias_attr=False), nn.BatchNorm2D(b), nn.LeakyReLU(0.2)]
    dis += [nn.Conv2D(d[-1], 1, 4, 1, 0, bias_attr=False), nn.Flatten(), nn.Sigmoid()]
    return nn.Sequential(*gen), nn.Sequential(*dis)


def torch_dcgan(torch, g, hw):
    tnn = torch.nn
    w = _gan_widths(g, hw)
    gen = [tnn.ConvTranspose2d(GAN_LATENT, w[0], 4, 1, 0, bias=False), tnn.BatchNorm2d(w[0]), tnn.ReLU()]
    for a, b in zip(w, w[1:]):
        gen += [tnn.ConvTranspose2d(a, b, 4, 2, 1, bias=False), tnn.BatchNorm2d(b), tnn.ReLU()]
    gen += [tnn.ConvTranspose2d(w[-1], 3, 4, 2, 1, bias=False), tnn.Tanh()]
    d = w[::-1]
    dis = [tnn.Conv2d(3, d[0], 4, 2, 1, bias=False), tnn.LeakyReLU(0.2)]
    for a, b in zip(d, d[1:]):
        dis += [tnn.Conv2d(a, b, 4, 2, 1, bias=False), tnn.BatchNorm2d(b), tnn.LeakyReLU(0.2)]
    dis += [tnn.Conv2d(d[-1], 1, 4, 1, 0, bias=False), tnn.Flatten(), tnn.Sigmoid()]
    return tnn.Sequential(*gen), tnn.Sequential(*dis)


def ddg_gan_step(g, hw, real, z):
    gen, dis = ddg_dcgan(g, hw)
    real_t, z_t = ddg.to_tensor(real), ddg.to_tensor(z)
    ones, zeros = ddg.ones([BATCH, 1]), ddg.zeros([BATCH, 1])
    og = ddg.optimizer.Adam(2e-4, 0.5, 0.999, parameters=gen.parameters())
    od = ddg.optimizer.Adam(2e-4, 0.5, 0.999, parameters=dis.parameters())
    gen.train()
    dis.train()

    def step():
        fake = gen(z_t)
        loss_d = F.binary_cross_entropy(dis(real_t), ones) + F.binary_cross_entropy(dis(fake.detach()), zeros)
        loss_d.backward()
        od.step()
        od.clear_grad()
        F.binary_cross_entropy(dis(fake), ones).backward()
        og.step()
        og.clear_grad()
        od.clear_grad()
    return step


def torch_gan_step(torch, g, hw, real, z):
    gen, dis = torch_dcgan(torch, g, hw)
    real_t, z_t = torch.from_numpy(real), torch.from_numpy(z)
    ones, zeros = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)
    og = torch.optim.Adam(gen.parameters(), 2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(dis.parameters(), 2e-4, betas=(0.5, 0.999))
    bce = torch.nn.functional.binary_cross_entropy
    gen.train()
    dis.train()

    def step():
        fake = gen(z_t)
        loss_d = bce(dis(real_t), ones) + bce(dis(fake.detach()), zeros)
        loss_d.backward()
        od.step()
        od.zero_grad()
        bce(dis(fake), ones).backward()
        og.step()
        og.zero_grad()
        od.zero_grad()
    return step


# -- MobileNet-style depthwise-separable net -----------------------------------------------------------
MOBILENET_BLOCKS = [(1, 2, 1), (2, 4, 2), (4, 4, 1), (4, 8, 2)]   # (in width, out width, stride) in units of C


def ddg_mobilenet(c):
    layers = [nn.Conv2D(3, c, 3, 1, 1, bias_attr=False), nn.BatchNorm2D(c), nn.ReLU6()]
    for a, b, s in MOBILENET_BLOCKS:
        layers += [nn.Conv2D(a * c, a * c, 3, s, 1, groups=a * c, bias_attr=False), nn.BatchNorm2D(a * c),
                   nn.ReLU6(), nn.Conv2D(a * c, b * c, 1, bias_attr=False), nn.BatchNorm2D(b * c), nn.ReLU6()]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(8 * c, 10))


def torch_mobilenet(torch, c):
    tnn = torch.nn
    layers = [tnn.Conv2d(3, c, 3, 1, 1, bias=False), tnn.BatchNorm2d(c), tnn.ReLU6()]
    for a, b, s in MOBILENET_BLOCKS:
        layers += [tnn.Conv2d(a * c, a * c, 3, s, 1, groups=a * c, bias=False), tnn.BatchNorm2d(a * c),
                   tnn.ReLU6(), tnn.Conv2d(a * c, b * c, 1, bias=False), tnn.BatchNorm2d(b * c), tnn.ReLU6()]
    return tnn.Sequential(*layers, tnn.AdaptiveAvgPool2d(1), tnn.Flatten(), tnn.Linear(8 * c, 10))


# -- MobileNetV2-style inverted residual net -----------------------------------------------------------
MOBILENETV2_BLOCKS = [(1, 16, 1), (6, 24, 2), (6, 24, 1), (6, 32, 2), (6, 32, 1), (6, 64, 2), (6, 64, 1)]


def _width(v, a):
    return max(8, int(v * a + 4) // 8 * 8)


def _v2_plan(a):
    """(input width, hidden width, output width, stride) per inverted residual block."""
    plan, cin = [], _width(32, a)
    for t, c, s in MOBILENETV2_BLOCKS:
        cout = _width(c, a)
        plan.append((cin, cin * t, cout, s))
        cin = cout
    return plan


def ddg_mobilenetv2(a):
    class Block(nn.Layer):
        def __init__(self, cin, hid, cout, s):
            super().__init__()
            layers = [nn.Conv2D(cin, hid, 1, bias_attr=False), nn.BatchNorm2D(hid), nn.ReLU6()] if hid != cin else []
            layers += [nn.Conv2D(hid, hid, 3, s, 1, groups=hid, bias_attr=False), nn.BatchNorm2D(hid), nn.ReLU6(),
                       nn.Conv2D(hid, cout, 1, bias_attr=False), nn.BatchNorm2D(cout)]
            self.body = nn.Sequential(*layers)
            self.res = s == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)
    plan = _v2_plan(a)
    last = _width(256, a)
    return nn.Sequential(nn.Conv2D(3, plan[0][0], 3, 1, 1, bias_attr=False), nn.BatchNorm2D(plan[0][0]), nn.ReLU6(),
                         *[Block(*b) for b in plan], nn.Conv2D(plan[-1][2], last, 1, bias_attr=False),
                         nn.BatchNorm2D(last), nn.ReLU6(), nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(last, 10))


def torch_mobilenetv2(torch, a):
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self, cin, hid, cout, s):
            super().__init__()
            layers = [tnn.Conv2d(cin, hid, 1, bias=False), tnn.BatchNorm2d(hid), tnn.ReLU6()] if hid != cin else []
            layers += [tnn.Conv2d(hid, hid, 3, s, 1, groups=hid, bias=False), tnn.BatchNorm2d(hid), tnn.ReLU6(),
                       tnn.Conv2d(hid, cout, 1, bias=False), tnn.BatchNorm2d(cout)]
            self.body = tnn.Sequential(*layers)
            self.res = s == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)
    plan = _v2_plan(a)
    last = _width(256, a)
    return tnn.Sequential(tnn.Conv2d(3, plan[0][0], 3, 1, 1, bias=False), tnn.BatchNorm2d(plan[0][0]), tnn.ReLU6(),
                          *[Block(*b) for b in plan], tnn.Conv2d(plan[-1][2], last, 1, bias=False),
                          tnn.BatchNorm2d(last), tnn.ReLU6(), tnn.AdaptiveAvgPool2d(1), tnn.Flatten(),
                          tnn.Linear(last, 10))


# -- GPT-style decoder ---------------------------------------------------------------------------------
GPT_LAYERS, GPT_HEADS = 2, 4


class _DdgGptBlock(nn.Layer):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop1, self.drop2 = nn.Dropout(0.1), nn.Dropout(0.1)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape([b, s, 3, GPT_HEADS, d // GPT_HEADS]).unbind(axis=2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).reshape([b, s, d])
        x = x + self.drop1(self.proj(a))
        return x + self.drop2(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class _DdgGpt(nn.Layer):
    def __init__(self, d, seq, vocab, tied):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.LayerList([_DdgGptBlock(d) for _ in range(GPT_LAYERS)])
        self.ln = nn.LayerNorm(d)
        self.head = None if tied else nn.Linear(d, vocab, bias_attr=False)
        self.register_buffer("positions", ddg.arange(seq, dtype="int64"))

    def forward(self, ids):
        x = self.drop(self.tok(ids) + self.pos(self.positions))
        for blk in self.blocks:
            x = blk(x)
        x = self.ln(x)
        return ddg.matmul(x, self.tok.weight, transpose_y=True) if self.head is None else self.head(x)


def torch_gpt(torch, d, seq, vocab, tied):
    tnn, tF = torch.nn, torch.nn.functional

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
            self.qkv, self.proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)
            self.fc1, self.fc2 = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)
            self.drop1, self.drop2 = tnn.Dropout(0.1), tnn.Dropout(0.1)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, GPT_HEADS, d // GPT_HEADS).permute(2, 0, 3, 1, 4)
            a = tF.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
            x = x + self.drop1(self.proj(a))
            return x + self.drop2(self.fc2(tF.gelu(self.fc1(self.ln2(x)))))

    class Gpt(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(vocab, d), tnn.Embedding(seq, d)
            self.drop = tnn.Dropout(0.1)
            self.blocks = tnn.ModuleList([Block() for _ in range(GPT_LAYERS)])
            self.ln = tnn.LayerNorm(d)
            self.head = None if tied else tnn.Linear(d, vocab, bias=False)
            self.register_buffer("positions", torch.arange(seq))

        def forward(self, ids):
            x = self.drop(self.tok(ids) + self.pos(self.positions))
            for blk in self.blocks:
                x = blk(x)
            x = self.ln(x)
            return x @ self.tok.weight.T if self.head is None else self.head(x)
    return Gpt()


def ddg_gpt_step(model, ids, vocab):
    inp, tgt = ddg.to_tensor(ids[:, :-1]), ddg.to_tensor(ids[:, 1:].reshape(-1))
    o = ddg.optimizer.AdamW(3e-4, parameters=model.parameters(), weight_decay=0.01)
    model.train()

    def step():
        F.cross_entropy(model(inp).reshape([-1, vocab]), tgt).backward()
        o.step()
        o.clear_grad()
    return step


def torch_gpt_step(torch, model, ids, vocab):
    inp, tgt = torch.from_numpy(ids[:, :-1]), torch.from_numpy(ids[:, 1:].reshape(-1))
    o = torch.optim.AdamW(model.parameters(), 3e-4, weight_decay=0.01)
    model.train()

    def step():
        torch.nn.functional.cross_entropy(model(inp).reshape(-1, vocab), tgt).backward()
        o.step()
        o.zero_grad()
    return step


# -- steps ---------------------------------------------------------------------------------------------
def ddg_step(model, x, y):
    xt, yt = ddg.to_tensor(x), ddg.to_tensor(y)
    o = ddg.optimizer.Momentum(0.01, 0.9, parameters=model.parameters())
    model.train()

    def step():
        F.cross_entropy(model(xt), yt).backward()
        o.step()
        o.clear_grad()
    return step


def torch_step(torch, model, x, y):
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    o = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()

    def step():
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        o.step()
        o.zero_grad()
    return step


def cases(only, quick):
    """``(name, make_ddg_step, make_torch_step)`` per size; each factory binds its own
    sizes and data, so they may be called after the generator has moved on."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, BATCH)
    if "resnet" in only:
        for c, hw in (RESNET_SIZES[:2] if quick else RESNET_SIZES):
            x = rng.standard_normal((BATCH, 3, hw, hw)).astype(np.float32)
            yield (f"resnet C={c} {hw}x{hw}", lambda c=c, hw=hw, x=x: ddg_step(ddg_resnet(c, hw)[0], x, y),
                   lambda t, c=c, hw=hw, x=x: torch_step(t, torch_resnet(t, c, hw), x, y))
    for kind in ("lstm", "gru", "rnn"):
        if kind in only:
            for h, steps in (RNN_SIZES[:2] if quick else RNN_SIZES):
                x = rng.standard_normal((BATCH, steps, 32)).astype(np.float32)
                yield (f"{kind} H={h} T={steps}", lambda kind=kind, h=h, x=x: ddg_step(_DdgRnnNet(kind, h), x, y),
                       lambda t, kind=kind, h=h, x=x: torch_step(t, torch_rnn(t, kind, h), x, y))
    if "rnnstack" in only:
        for kind, h, steps, bidir, proj in (RNN_STACK_SIZES[:1] if quick else RNN_STACK_SIZES):
            x = rng.standard_normal((BATCH, steps, 32)).astype(np.float32)
            yield (f"{kind} 2 layers{' bidirectional' if bidir else ''} H={h}{f' P={proj}' if proj else ''} T={steps}",
                   lambda kind=kind, h=h, bidir=bidir, proj=proj, x=x:
                   ddg_step(_DdgRnnNet(kind, h, 2, bidir, proj), x, y),
                   lambda t, kind=kind, h=h, bidir=bidir, proj=proj, x=x:
                   torch_step(t, torch_rnn(t, kind, h, 2, bidir, proj), x, y))
    if "cells" in only:
        for kind, h, steps, b in (CELL_SIZES[:1] if quick else CELL_SIZES):
            x = rng.standard_normal((b, steps, 32)).astype(np.float32)
            yb = rng.integers(0, 10, b)
            yield (f"{kind} cell loop H={h} T={steps} batch {b}",
                   lambda kind=kind, h=h, x=x, yb=yb: ddg_step(_DdgCellLoop(kind, h), x, yb),
                   lambda t, kind=kind, h=h, x=x, yb=yb: torch_step(t, torch_cell_loop(t, kind, h), x, yb))
    if "transformer" in only:
        for d, seq in (TRANSFORMER_SIZES[:1] if quick else TRANSFORMER_SIZES):
            x = rng.standard_normal((BATCH, seq, d)).astype(np.float32)
            yield (f"transformer d={d} S={seq}", lambda d=d, x=x: ddg_step(_DdgEncoder(d), x, y),
                   lambda t, d=d, x=x: torch_step(t, torch_encoder(t, d), x, y))
    if "dcgan" in only:
        for g, hw in (DCGAN_SIZES[:1] if quick else DCGAN_SIZES):
            real = rng.uniform(-1, 1, (BATCH, 3, hw, hw)).astype(np.float32)
            z = rng.standard_normal((BATCH, GAN_LATENT, 1, 1)).astype(np.float32)
            yield (f"dcgan G={g} {hw}x{hw}", lambda g=g, hw=hw, real=real, z=z: ddg_gan_step(g, hw, real, z),
                   lambda t, g=g, hw=hw, real=real, z=z: torch_gan_step(t, g, hw, real, z))
    if "mobilenet" in only:
        for c, hw in (MOBILENET_SIZES[:1] if quick else MOBILENET_SIZES):
            x = rng.standard_normal((BATCH, 3, hw, hw)).astype(np.float32)
            yield (f"mobilenet C={c} {hw}x{hw}", lambda c=c, x=x: ddg_step(ddg_mobilenet(c), x, y),
                   lambda t, c=c, x=x: torch_step(t, torch_mobilenet(t, c), x, y))
    if "mobilenetv2" in only:
        for a, hw in (MOBILENETV2_SIZES[:1] if quick else MOBILENETV2_SIZES):
            x = rng.standard_normal((BATCH, 3, hw, hw)).astype(np.float32)
            yield (f"mobilenetv2 A={a} {hw}x{hw}", lambda a=a, x=x: ddg_step(ddg_mobilenetv2(a), x, y),
                   lambda t, a=a, x=x: torch_step(t, torch_mobilenetv2(t, a), x, y))
    if "gpt" in only:
        for size in (GPT_SIZES[:1] if quick else GPT_SIZES):
            d, seq, vocab, tied = size
            ids = rng.integers(0, vocab, (GPT_BATCH, seq + 1))
            yield (f"gpt d={d} S={seq} V={vocab} {'tied' if tied else 'untied'}",
                   lambda size=size, ids=ids: ddg_gpt_step(_DdgGpt(*size), ids, size[2]),
                   lambda t, size=size, ids=ids: torch_gpt_step(t, torch_gpt(t, *size), ids, size[2]))


def race_case(make_ddg, make_torch, torch, rounds, round_time):
    """``(ddg, torch)`` seconds per step of one case (torch's None without torch): ddg's step
    made and run twice (compiling, then timing one step to set the step count so that a round
    takes about ``round_time`` seconds), torch's seeded, then ``race``'s interleaved rounds."""
    fns = {"ddg": make_ddg()}
    fns["ddg"]()
    t0 = time.perf_counter()
    fns["ddg"]()
    steps = max(1, min(50, round(round_time / (time.perf_counter() - t0))))
    if torch is not None:
        torch.manual_seed(0)
        fns["torch"] = make_torch(torch)
    r = race(fns, steps, rounds, warmup=2)
    return r["ddg"][0], r.get("torch", (None,))[0]


def main():
    global BATCH
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="resnet,lstm,gru,rnn,transformer,dcgan,mobilenet,gpt")
    ap.add_argument("--quick", action="store_true", help="the first sizes of each class only")
    ap.add_argument("--round-time", type=float, default=0.25, help="seconds of ddg steps per round (sets the "
                    "step count per size)")
    ap.add_argument("--batch", type=int, default=BATCH, help="batch size of every class but GPT (default 16)")
    args = ap.parse_args()
    BATCH = args.batch
    torch = try_torch()
    only = set(args.only.split(","))
    print("| model | ddg ms | torch ms | ddg/torch |\n|---|---|---|---|", flush=True)
    for name, make_ddg, make_torch in cases(only, args.quick):
        d, t = race_case(make_ddg, make_torch, torch, args.rounds, args.round_time)
        print(f"| {name} | {d * 1e3:.2f} | {'' if t is None else f'{t * 1e3:.2f}'} | "
              f"{'' if t is None else f'{d / t:.2f}'} |", flush=True)


if __name__ == "__main__":
    main()
