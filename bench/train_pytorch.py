# examples/train's run in PyTorch 1.13 (/usr/bin/python3): the peer its speed is stated
# against (bench/train_side_by_side.sh runs both in turn on one machine). The same data
# (Fashion-MNIST's IDX files, byte / 255 as torchvision's ToTensor and ember's FashionMNIST),
# model (examples/train_model.h: two conv-ReLU-maxpool stages, Linear 1568->128, ReLU,
# Dropout 0.25, Linear 128->10, inputs standardised with 0.2860, 0.3530), batch 64, Adam at
# 0.001, a shuffled DataLoader with 2 workers (train's defaults), one line per epoch as train
# prints it: the training loss, the test accuracy and the epoch's training images/s (the
# training loop alone, as train times it). The weights start from PyTorch's generator, so
# losses and accuracies agree with ember's within noise, not bit for bit.
#   /usr/bin/python3 bench/train_pytorch.py [--epochs 1] [--workers 2] [--data DIR]
import argparse
import gzip
import os
import struct
import time

import torch
import torch.nn.functional as F

from train_torch_model import TrainCnn  # bench/, beside this script

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
a = p.parse_args()


def idx(name):
    with gzip.open(os.path.join(a.data, name)) as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim :]), dtype=torch.uint8).view(*dims)


def dataset(prefix):
    images = idx(f"{prefix}-images-idx3-ubyte.gz").float().div_(255).unsqueeze(1)
    labels = idx(f"{prefix}-labels-idx1-ubyte.gz").long()
    return torch.utils.data.TensorDataset(images, labels)


torch.manual_seed(a.seed)
train_set, test_set = dataset("train"), dataset("t10k")
train_loader = torch.utils.data.DataLoader(train_set, batch_size=a.batch_size, shuffle=True, num_workers=a.workers)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000, num_workers=a.workers)
net = TrainCnn()
adam = torch.optim.Adam(net.parameters(), lr=a.lr)
print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads, cpu", flush=True)
for epoch in range(1, a.epochs + 1):
    start = time.perf_counter()
    total, steps, images = torch.zeros(()), 0, 0
    for x, y in train_loader:
        adam.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        adam.step()
        total += loss.detach()
        steps += 1
        images += y.size(0)
    seconds = time.perf_counter() - start
    net.eval()
    correct = seen = 0
    with torch.no_grad():
        for x, y in test_loader:
            correct += (net(x).argmax(1) == y).sum().item()
            seen += y.size(0)
    net.train()
    print(f"epoch {epoch}  loss {total.item() / max(steps, 1):.4f}  test accuracy {100 * correct / seen:.2f}%  "
          f"{images / seconds:.0f} images/s", flush=True)
