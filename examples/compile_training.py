"""Trains a small CNN and a small transformer with torch.compile on openreg and on the CPU, side by side.

Each model starts from the same weights on both devices and sees the same
batches; its forward and backward are compiled (Inductor by default), the SGD
step runs eagerly. The two loss curves are printed next to each other and must
agree within Inductor's float32 test tolerance (rtol 1.3e-5, atol 1.5e-5, see
docs/compile.md); the script says when they are identical bit for bit, and
exits non-zero if any step disagrees.

    python examples/compile_training.py [--steps N] [--backend inductor]
"""

import argparse
import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

RTOL, ATOL = 1.3e-5, 1.5e-5
VOCABULARY, SEQUENCE = 32, 16


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, images):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(images))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


class SmallTransformer(nn.Module):
    """One encoder layer over token embeddings, predicting each token's successor."""

    def __init__(self, width=32):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, width)
        self.position = nn.Parameter(0.02 * torch.randn(SEQUENCE, width))
        # dropout=0: the comparison is about the compiled arithmetic, not random masks.
        self.encoder = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, VOCABULARY)

    def forward(self, tokens):
        return self.head(self.encoder(self.embedding(tokens) + self.position))


def image_batches(steps, batch=16):
    """Deterministic 16x16 images: each class is a noisy fixed pattern."""
    generator = torch.Generator().manual_seed(1234)
    prototypes = torch.randn(10, 1, 16, 16, generator=generator)
    for _ in range(steps):
        labels = torch.randint(0, 10, (batch,), generator=generator)
        yield prototypes[labels] + 0.5 * torch.randn(batch, 1, 16, 16, generator=generator), labels


def token_batches(steps, batch=8):
    """Deterministic sequences counting up from a random start (mod the vocabulary); the target is the next token."""
    generator = torch.Generator().manual_seed(4321)
    for _ in range(steps):
        starts = torch.randint(0, VOCABULARY, (batch, 1), generator=generator)
        tokens = (starts + torch.arange(SEQUENCE + 1)) % VOCABULARY
        yield tokens[:, :-1], tokens[:, 1:]


def train(model, batches, device, backend):
    """The loss of each step, training ``model`` (a copy, moved to ``device``) with its forward compiled."""
    model = copy.deepcopy(model).to(device)
    compiled = torch.compile(model, backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    losses = []
    for inputs, targets in batches:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        logits = compiled(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def compare(name, cpu_losses, openreg_losses):
    """Prints the two curves side by side; True when every step agrees within the tolerance."""
    print(f"{name}\n{'step':>4}  {'cpu loss':>12}  {'openreg loss':>12}  {'difference':>10}")
    agree = True
    for step, (cpu, openreg) in enumerate(zip(cpu_losses, openreg_losses)):
        close = abs(cpu - openreg) <= ATOL + RTOL * abs(cpu)
        agree &= close
        print(f"{step:>4}  {cpu:>12.8f}  {openreg:>12.8f}  {openreg - cpu:>10.3g}{'' if close else '  MISMATCH'}")
    identical = cpu_losses == openreg_losses
    verdict = "identical bit for bit" if identical else ("agree within tolerance" if agree else "DISAGREE")
    print(f"{name}: {verdict}\n")
    return agree


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--backend", default="inductor", help="torch.compile backend for both devices")
    args = parser.parse_args()

    torch.manual_seed(0)
    models = {
        "small CNN": (SmallCNN(), image_batches),
        "small transformer": (SmallTransformer(), token_batches),
    }
    agree = True
    for name, (model, batches) in models.items():
        curves = [train(model, batches(args.steps), device, args.backend) for device in ("cpu", "openreg")]
        agree &= compare(name, *curves)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
