"""torchvision's operators under torch.autocast("openreg") follow CUDA's
autocast policy for them: float32 computation, results in the input's dtype
(nms: indices). Runs where torchvision is installed (it is not a dependency of
torch_openreg)."""

import pytest
import torch

from conftest import DEVICE, assert_same, make_cpu

torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed")
ops = torchvision.ops


def boxes(n=6, size=16, seed=7):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * size / 2
    wh = torch.rand(n, 2, generator=g) * size / 2 + 1
    return torch.cat([xy, xy + wh], dim=1)


def rois(n=6):
    return torch.cat([torch.tensor([[0.0], [1.0]]).repeat(n // 2, 1), boxes(n)], dim=1)


FEATURES = make_cpu((2, 8, 16, 16), torch.float32, seed=3)

# name -> (call, float32 arguments on the CPU)
CALLS = {
    "roi_align": (lambda x, r: ops.roi_align(x, r, (4, 4), 1.0, 2, True), (FEATURES, rois())),
    "roi_pool": (lambda x, r: ops.roi_pool(x, r, (4, 4), 1.0), (FEATURES, rois())),
    "ps_roi_align": (lambda x, r: ops.ps_roi_align(x, r, (2, 2), 1.0, 2), (FEATURES, rois())),
    "ps_roi_pool": (lambda x, r: ops.ps_roi_pool(x, r, (2, 2), 1.0), (FEATURES, rois())),
    "deform_conv2d": (
        lambda x, offset, w: ops.deform_conv2d(x, offset, w, padding=1),
        (FEATURES, make_cpu((2, 18, 16, 16), seed=4) * 0.5, make_cpu((4, 8, 3, 3), seed=5)),
    ),
    "nms": (lambda b, s: ops.nms(b, s, 0.3), (boxes(12), make_cpu((12,), seed=6))),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_operator_under_autocast_follows_cudas_policy(name, dtype):
    call, args = CALLS[name]
    # What CUDA's autocast kernel computes: the operator in float32 on inputs
    # autocast left in `dtype`, the result back in that dtype.
    low = [a.to(dtype) for a in args]
    expected = call(*[a.float() for a in low])
    if name != "nms":
        expected = expected.to(dtype)
    with torch.autocast(DEVICE, dtype=dtype):
        actual = call(*[a.to(DEVICE) for a in low])
    assert_same(actual, expected)


def test_operators_outside_autocast_are_unchanged():
    call, (x, r) = CALLS["roi_align"]
    with pytest.raises(RuntimeError):  # mixed dtypes, as on the CPU without autocast
        call(x.to(DEVICE, torch.bfloat16), r.to(DEVICE))
    assert_same(call(x.to(DEVICE), r.to(DEVICE)), call(x, r))


def test_mixed_precision_detection_head_trains_as_on_the_cpu():
    """A detection-style step: features in bfloat16 from autocast convolutions,
    roi_align on them, a loss, backward; the same step under CPU autocast."""
    results = []
    for device in ("cpu", DEVICE):
        torch.manual_seed(0)
        conv = torch.nn.Conv2d(3, 8, 3, padding=1).to(device)
        image = make_cpu((2, 3, 16, 16), seed=1).to(device)
        with torch.autocast(device, dtype=torch.bfloat16):
            features = conv(image)
            pooled = ops.roi_align(features, rois().to(device), (4, 4), 1.0, 2, True)
        pooled.float().square().mean().backward()
        results.append((pooled, conv.weight.grad))
    for got, want in zip(results[1], results[0]):
        assert_same(got, want)
