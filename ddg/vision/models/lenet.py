"""LeNet (``paddle.vision.models.LeNet``): Paddle's exact layers, names and shapes."""
from ... import nn
from ...autograd.ops.movement import flatten

__all__ = ["LeNet"]


class LeNet(nn.Layer):
    """The LeNet-5 of Paddle's model zoo, for 1x28x28 images.

    ``features``: 3x3 convolution to 6 channels (padding 1), ReLU, 2x2 max pooling,
    5x5 convolution to 16 channels, ReLU, 2x2 max pooling (16x5x5 out). ``fc``:
    linear layers 400 -> 120 -> 84 -> ``num_classes`` with no activation between
    them (as Paddle's). With ``num_classes <= 0`` there is no ``fc`` and the output
    is the feature map.
    """

    def __init__(self, num_classes=10):
        super().__init__()
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2D(1, 6, 3, stride=1, padding=1),
            nn.ReLU(),
            nn.MaxPool2D(2, 2),
            nn.Conv2D(6, 16, 5, stride=1, padding=0),
            nn.ReLU(),
            nn.MaxPool2D(2, 2))
        if num_classes > 0:
            self.fc = nn.Sequential(
                nn.Linear(400, 120),
                nn.Linear(120, 84),
                nn.Linear(84, num_classes))

    def forward(self, inputs):
        x = self.features(inputs)
        if self.num_classes > 0:
            x = flatten(x, 1)
            x = self.fc(x)
        return x
