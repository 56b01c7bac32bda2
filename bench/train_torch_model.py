# examples/train's network (examples/train_model.h) in torch.nn, under the same names: for
# bench/torch_gpu.py and bench/train_pytorch.py.
import torch.nn as nn


class TrainCnn(nn.Module):
    """examples/train's FashionCnn: with its input standardisation."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
                                        nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features((x - 0.2860) / 0.3530))
