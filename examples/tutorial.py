"""The dynamic-graph tutorial (acceptance programs s000_*.py), in ddg: tensors, Python control flow, a
network whose structure changes from step to step, and weight sharing.

    python examples/tutorial.py
"""
import numpy as np

import ddg as paddle
import ddg.nn.functional as F

# -- 1. basic usage: operations run immediately and return results --------------------
print("ddg", paddle.__version__)
a = paddle.randn([4, 2])
b = paddle.arange(1, 3, dtype="float32")
print("a =", a)
print("a + b (broadcast) =", a + b)
print("matmul(a, b) =", paddle.matmul(a, b))

# -- 2. ordinary Python control flow decides what runs --------------------------------
x = paddle.to_tensor(np.array([1, 2, 3]))
y = paddle.to_tensor(np.array([4, 5, 6]))
for i in range(5):
    if paddle.rand([1]) > 0.5:
        print(i, "+>", (paddle.pow(x, i) + y).numpy())
    else:
        print(i, "->", (paddle.pow(x, i) - y).numpy())


# -- 3. a network whose middle layer runs only when a coin lands heads ----------------
class MyModel(paddle.nn.Layer):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear1 = paddle.nn.Linear(input_size, hidden_size)
        self.linear2 = paddle.nn.Linear(hidden_size, hidden_size)
        self.linear3 = paddle.nn.Linear(hidden_size, 1)

    def forward(self, inputs):
        h = F.relu(self.linear1(inputs))
        if paddle.rand([1]) > 0.5:  # decided afresh at every call
            h = F.relu(self.linear2(h))
        return self.linear3(h)


paddle.seed(0)
data_x = np.random.default_rng(0).standard_normal((1000, 128)).astype(np.float32)
data_y = np.random.default_rng(1).standard_normal((1000, 1)).astype(np.float32)
model = MyModel(128, 256)
loss_fn = paddle.nn.MSELoss()
opt = paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())
for step in range(600):
    idx = np.random.default_rng(step).choice(1000, 64, replace=False)
    loss = loss_fn(model(paddle.to_tensor(data_x[idx])), paddle.to_tensor(data_y[idx]))
    loss.backward()
    opt.step()
    opt.clear_grad()
    if step % 150 == 0:
        print(f"step {step}: loss {float(loss):.4f}")

# -- 4. weight sharing: the decoder reuses the encoder's weight, transposed -----------
inputs = paddle.rand((256, 64))
linear = paddle.nn.Linear(64, 8, bias_attr=False)
adam = paddle.optimizer.Adam(0.01, parameters=linear.parameters())
for i in range(10):
    hidden = linear(inputs)
    outputs = paddle.matmul(hidden, linear.weight, transpose_y=True)
    loss = F.mse_loss(outputs, inputs)
    loss.backward()  # both uses of the weight add up in its gradient
    adam.step()
    adam.clear_grad()
    print(f"autoencoder step {i}: loss {float(loss):.4f}")
