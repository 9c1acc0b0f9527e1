"""Paddle's ``group_sharded_parallel`` example with only the import line changed:
AdamW with global-norm clipping and a GradScaler, the optimizer state sharded over the
ranks, then ``save_group_sharded_model`` (ordinary, full checkpoint files).

    python examples/group_sharded.py [output_dir]
    ddgrun -n 2 python examples/group_sharded.py [output_dir]
"""
import sys
import tempfile

import numpy as np

import ddg as paddle
from ddg.nn import Linear
from ddg.distributed import fleet
from ddg.distributed.sharding import group_sharded_parallel, save_group_sharded_model

output_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="group_sharded_")

fleet.init(is_collective=True)
model = Linear(1000, 1000)

clip = paddle.nn.ClipGradByGlobalNorm(clip_norm=1.0)
optimizer = paddle.optimizer.AdamW(learning_rate=0.001, parameters=model.parameters(), weight_decay=0.00001,
                                   grad_clip=clip)
scaler = paddle.amp.GradScaler(init_loss_scaling=1024)

# wrap sharding model, optimizer and scaler
model, optimizer, scaler = group_sharded_parallel(model, optimizer, "os", scaler=scaler)

rng = np.random.default_rng(paddle.distributed.get_rank())
for step in range(3):
    img = paddle.to_tensor(rng.standard_normal((8, 1000)).astype("float32"))
    label = paddle.to_tensor(rng.integers(0, 1000, (8, 1)))
    label.stop_gradient = True
    img.stop_gradient = True

    out = model(img)
    loss = paddle.nn.functional.cross_entropy(input=out, label=label)

    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.clear_grad()
    if paddle.distributed.get_rank() == 0:
        print(f"step {step} loss {float(loss):.5f}")

# save model and optimizer state_dict
save_group_sharded_model(model, output=output_dir, optimizer=optimizer)
if paddle.distributed.get_rank() == 0:
    print(f"group_sharded saved to {output_dir}")
