"""Paddle's collective-training quick start (fleet, data parallel), with only the import
line changed. Sizes are cut down so that it runs on a CPU in seconds (Paddle's: ResNet-50
on 224x224 images, 10 epochs of 100 batches of 32).

    python examples/fleet_quickstart.py               # one process
    ddgrun -n 2 python examples/fleet_quickstart.py   # data parallel on 2 ranks
"""
import numpy as np

import ddg as paddle
from ddg.distributed import fleet
from ddg.vision.models import ResNet
from ddg.vision.models.resnet import BasicBlock
from ddg.io import Dataset, DataLoader

base_lr = 0.1
momentum_rate = 0.9
l2_decay = 1e-4
epoch = 1
batch_num = 4
batch_size = 8
class_dim = 10
image_size = 32


class RandomDataset(Dataset):
    def __init__(self, num_samples):
        self.num_samples = num_samples

    def __getitem__(self, idx):
        image = np.random.random([3, image_size, image_size]).astype('float32')
        label = np.random.randint(0, class_dim - 1, (1, )).astype('int64')
        return image, label

    def __len__(self):
        return self.num_samples


def optimizer_setting(parameter_list=None):
    optimizer = paddle.optimizer.Momentum(
        learning_rate=base_lr,
        momentum=momentum_rate,
        weight_decay=paddle.regularizer.L2Decay(l2_decay),
        parameters=parameter_list)
    return optimizer


def train_resnet():
    fleet.init(is_collective=True)

    resnet = ResNet(BasicBlock, 18, num_classes=class_dim)
    optimizer = optimizer_setting(parameter_list=resnet.parameters())
    optimizer = fleet.distributed_optimizer(optimizer)
    resnet = fleet.distributed_model(resnet)

    dataset = RandomDataset(batch_num * batch_size)
    train_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True, num_workers=0)

    for eop in range(epoch):
        resnet.train()
        for batch_id, data in enumerate(train_loader()):
            img, label = data
            label.stop_gradient = True

            out = resnet(img)
            loss = paddle.nn.functional.cross_entropy(input=out, label=label)
            avg_loss = paddle.mean(x=loss)
            acc_top1 = paddle.metric.accuracy(input=out, label=label, k=1)
            acc_top5 = paddle.metric.accuracy(input=out, label=label, k=5)

            avg_loss.backward()
            optimizer.step()
            resnet.clear_gradients()

            if batch_id % 2 == 0:
                print("[Epoch %d, batch %d] loss: %.5f, acc1: %.5f, acc5: %.5f" % (
                    eop, batch_id, avg_loss, acc_top1, acc_top5))
    if fleet.is_first_worker():
        print(f"fleet quick start done on {fleet.worker_num()} worker(s)")


if __name__ == '__main__':
    train_resnet()
