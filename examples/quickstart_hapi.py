"""Paddle's quick start with the high-level API, unchanged but for the import line.

    DDG_DATA_DIR=../shared/data/mnist-10k python examples/quickstart_hapi.py
    DDG_DATA_DIR=../shared/data/mnist-10k ddgrun -n 2 python examples/quickstart_hapi.py

This is the program of Paddle 2's "quick start" page (LeNet from the model zoo,
``paddle.Model``, Adam, cross-entropy, ``paddle.metric.Accuracy``, five epochs of
batches of 64, evaluation, save/load, one prediction, the summary table); with
``import paddle`` it runs on PaddlePaddle. ``ddg.vision.datasets.MNIST`` reads the
files from the folder in ``$DDG_DATA_DIR`` (or downloads the official ones with
``download=True``). Launched on several ranks, ``fit`` trains data-parallel and only
rank 0 prints and writes ``output/``.
"""
import numpy as np

import ddg as paddle
from ddg.vision.transforms import Normalize

transform = Normalize(mean=[127.5], std=[127.5], data_format='CHW')
# the training and test sets
train_dataset = paddle.vision.datasets.MNIST(mode='train', transform=transform)
test_dataset = paddle.vision.datasets.MNIST(mode='test', transform=transform)

# the network, wrapped in a Model
lenet = paddle.vision.models.LeNet(num_classes=10)
model = paddle.Model(lenet)

# optimizer, loss and metric
model.prepare(paddle.optimizer.Adam(parameters=model.parameters()),
              paddle.nn.CrossEntropyLoss(),
              paddle.metric.Accuracy())

# training
model.fit(train_dataset, epochs=5, batch_size=64, verbose=1)
# evaluation
result = model.evaluate(test_dataset, batch_size=64, verbose=1)
print(result)

# save, then load
model.save('./output/mnist')
model.load('output/mnist')

# one test image, with a batch axis added
img, label = test_dataset[0]
img_batch = np.expand_dims(img.astype('float32'), axis=0)

# predict_batch returns a list: the first output's array
out = model.predict_batch(img_batch)[0]
pred_label = out.argmax()
print('true label: {}, pred label: {}'.format(label[0], pred_label))

paddle.summary(lenet, (1, 1, 28, 28))
