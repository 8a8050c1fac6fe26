"""Trains a small CNN for a few steps on openreg and on the CPU, side by side.

Both runs start from the same weights and see the same batches, so the losses
must agree; the script exits non-zero if they do not.

    python examples/train.py [--steps N]
"""

import argparse
import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


def synthetic_batches(steps: int, batch_size: int = 32):
    """Deterministic MNIST-shaped data: each class is a noisy fixed pattern."""
    gen = torch.Generator().manual_seed(1234)
    prototypes = torch.randn(10, 1, 28, 28, generator=gen)
    for _ in range(steps):
        labels = torch.randint(0, 10, (batch_size,), generator=gen)
        images = prototypes[labels] + 0.5 * torch.randn(batch_size, 1, 28, 28, generator=gen)
        yield images, labels


def train(model: nn.Module, device: str, steps: int) -> list[float]:
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for images, labels in synthetic_batches(steps):
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = SmallCNN()
    cpu_losses = train(copy.deepcopy(model), "cpu", args.steps)
    openreg_losses = train(copy.deepcopy(model), "openreg", args.steps)

    print(f"accelerator: {torch.accelerator.current_accelerator()}, {torch.accelerator.device_count()} devices")
    print(f"{'step':>4}  {'cpu loss':>10}  {'openreg loss':>12}")
    for step, (c, o) in enumerate(zip(cpu_losses, openreg_losses)):
        print(f"{step:>4}  {c:>10.6f}  {o:>12.6f}")
    worst = max(abs(c - o) for c, o in zip(cpu_losses, openreg_losses))
    ok = worst <= 1e-4 * max(1.0, max(cpu_losses))
    print(f"largest difference: {worst:.3g} -> {'match' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
