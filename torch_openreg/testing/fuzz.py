"""Differential fuzzing: random operator programs run on the CPU and on openreg, compared bit for bit.

A program is a seed, a few input tensors and 10-20 steps, each one line of Python (``v5 = torch.add(v1, v3)``)
drawn from the operator table in ``fuzz_ops``. It is generated from its seed alone (``generate``), run line by
line on each device (``run``), and every line's outcome (the value's dtype, shape, strides, storage offset,
``requires_grad`` and bits; or the type of the exception it raised) must be the same on both, as must the final
state of every variable (in-place operators and ``out=`` mutate earlier values). The lines are the reproducer:
``fuzz_shrink`` removes and simplifies lines while the divergence persists and prints them as a script.

openreg runs the programs with the CPU's contract (``torch.openreg.cuda_contract.enabled(False)``): the fuzzer checks
openreg's kernels against the CPU's, so the dtypes and operators CUDA refuses (docs/cuda-contract.md, tested on
their own) are computed here too.
"""

import random
import warnings
from dataclasses import dataclass

import torch

from .fuzz_known import KNOWN_DIVERGENCES
from .fuzz_ops import OPERATORS, Reject
from .placement import DEVICE

# Every value stays far below ATen's intra-op grain size (32768 elements), so no
# CPU kernel splits its work across threads and reductions accumulate in one
# order whatever the thread count of the calling thread (openreg's autograd
# device thread included).
MAX_NUMEL = 2048
MAX_DIM = 4
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded", "channels_last")
_SIZES = (1, 2, 3, 4, 5, 7)
_INPUT_DTYPES = (
    [torch.float32] * 6
    + [torch.float64] * 2
    + [
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int64,
        torch.int32,
        torch.uint8,
        torch.int8,
        torch.bool,
        torch.bool,
        torch.complex64,
    ]
)


def fuzz_input(shape, dtype, layout="contiguous", seed=0, requires_grad=False, device="cpu"):
    """A tensor of ``shape`` whose values depend only on ``seed``, laid out in memory as ``layout`` says.

    The values are drawn on the CPU and copied to ``device``; the view that gives the layout is taken on
    ``device``, so openreg sees the same strides and storage offset as the CPU. A float input whose seed
    is a multiple of 3 also holds infinities, NaN and negative zero.
    """
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        base_shape = shape[:-2] + (shape[-1], shape[-2])
    elif layout == "strided" and shape:
        base_shape = shape[:-1] + (2 * shape[-1],)
    elif layout == "offset":
        base_shape = (3 + _numel(shape),)
    elif layout == "expanded" and shape:
        base_shape = (1,) + shape[1:]
    elif layout == "channels_last" and len(shape) == 4:
        base_shape = (shape[0], shape[2], shape[3], shape[1])
    else:
        layout, base_shape = "contiguous", shape
    base = _values(base_shape, dtype, seed).to(device).requires_grad_(requires_grad)
    if layout == "transposed":
        return base.transpose(-1, -2)
    if layout == "strided":
        return base[..., ::2]
    if layout == "offset":
        return base[3:].view(shape)
    if layout == "expanded":
        return base.expand(shape)
    if layout == "channels_last":
        return base.permute(0, 3, 1, 2)
    return base


def _numel(shape):
    numel = 1
    for size in shape:
        numel *= size
    return numel


def _values(shape, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=dtype)
    if not dtype.is_floating_point:
        low = 0 if dtype == torch.uint8 else -8
        return torch.randint(low, 10, shape, generator=generator).to(dtype)
    values = torch.randn(shape, generator=generator, dtype=torch.float64) * 2
    if seed % 3 == 0 and values.numel() >= 4:
        flat = values.view(-1)
        picks = torch.randint(0, flat.numel(), (4,), generator=generator)
        flat[picks] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0], dtype=torch.float64)
    return values.to(dtype)


@dataclass(frozen=True)
class Input:
    """A line that makes an input tensor."""

    name: str
    shape: tuple
    dtype: torch.dtype
    layout: str
    seed: int
    requires_grad: bool
    op = "input"

    @property
    def expression(self):
        return (
            f"fuzz_input({self.shape}, {self.dtype}, {self.layout!r}, seed={self.seed}, "
            f"requires_grad={self.requires_grad}, device=device)"
        )


@dataclass(frozen=True)
class Step:
    """A line that applies operator ``op`` (a name in the operator table) to earlier values."""

    name: str
    op: str
    expression: str


@dataclass(frozen=True)
class Program:
    """Lines run in order after ``torch.manual_seed(seed)``; each assigns one variable."""

    seed: int
    lines: tuple

    def source(self, indent=""):
        return "\n".join(f"{indent}{line.name} = {line.expression}" for line in self.lines)


@dataclass(frozen=True)
class Divergence:
    """Line ``index`` (or, with ``final``, the final state of its variable) differs between the devices."""

    index: int
    name: str
    op: str
    message: str
    final: bool = False

    @property
    def signature(self):
        return ("final " if self.final else "") + self.op

    def __str__(self):
        where = "final state of" if self.final else "line"
        return f"{where} {self.name} ({self.op}): {self.message}"


def namespace(device, extra=None):
    """The globals a program's lines are evaluated in."""
    return {"torch": torch, "F": torch.nn.functional, "fuzz_input": fuzz_input, "device": device, **(extra or {})}


def generate(seed, operators=OPERATORS, exclusions=KNOWN_DIVERGENCES, extra=None):
    """The program of ``seed``: the same seed always gives the same program.

    Lines are drawn from ``operators`` and kept when they run on the CPU, give a tensor of at most
    ``MAX_NUMEL`` elements, and match none of ``exclusions`` (divergences already known). ``extra`` are
    names the operators use beyond the fuzzer's namespace.
    """
    rng = random.Random(seed)
    torch.manual_seed(seed)
    scope = namespace("cpu", extra)
    values = {}
    lines = []
    base_shape = tuple(rng.choice(_SIZES) for _ in range(rng.randint(1, MAX_DIM)))
    for index in range(rng.randint(2, 4)):
        line = _random_input(rng, f"v{index}", base_shape)
        values[line.name] = scope[line.name] = eval(line.expression, scope)
        lines.append(line)
    wanted = len(lines) + rng.randint(10, 20)
    for _ in range(40 * wanted):
        if len(lines) == wanted:
            break
        operator = rng.choice(operators)
        picker = Picker(rng, values, seed * 1000 + len(lines))
        try:
            expression = operator.render(picker)
            if any(exclusion.matches(operator.name, picker.picked) for exclusion in exclusions):
                continue
        except Reject:
            continue
        result, error = _evaluate(expression, scope)
        if (
            error is None
            and isinstance(result, torch.Tensor)
            and result.numel() <= MAX_NUMEL
            and result.dim() <= MAX_DIM
        ):
            line = Step(f"v{len(lines)}", operator.name, expression)
            values[line.name] = scope[line.name] = result
            lines.append(line)
    return Program(seed, tuple(lines))


def _random_input(rng, name, base_shape):
    # Suffixes of one shape with some sizes set to 1, so that inputs broadcast against each other.
    shape = tuple(size if rng.random() < 0.8 else 1 for size in base_shape[rng.randint(0, len(base_shape)) :])
    if rng.random() < 0.05:
        shape = shape[:-1] + (0,) if shape else (0,)
    dtype = rng.choice(_INPUT_DTYPES)
    layout = rng.choice(LAYOUTS)
    requires_grad = (dtype.is_floating_point or dtype.is_complex) and rng.random() < 0.5
    return Input(name, shape, dtype, layout, rng.randrange(1 << 16), requires_grad)


class Picker:
    """What an operator's ``render`` draws its operands from: the values so far (on the CPU) and the rng.

    Every value picked is recorded in ``picked`` (for the exclusions).
    """

    def __init__(self, rng, values, seed):
        self.rng = rng
        self.values = values
        self.picked = []
        self._seed = seed

    def tensor(self, where=None):
        """The name of a random value satisfying ``where`` (a predicate on the CPU tensor)."""
        names = [name for name, value in self.values.items() if where is None or where(value)]
        if not names:
            raise Reject
        name = self.rng.choice(names)
        self.picked.append(self.values[name])
        return name

    def __getitem__(self, name):
        return self.values[name]

    def fresh(self, shape, dtype, layout=None, requires_grad=False):
        """An inline expression making a new input (for operands whose shape must fit another's)."""
        self._seed += 1
        layout = layout or self.rng.choice(LAYOUTS)
        line = Input("", tuple(shape), dtype, layout, self._seed % (1 << 16), requires_grad)
        self.picked.append(eval(line.expression, namespace("cpu")))
        return line.expression

    def partner(self, name, dtype=None, cpu_scalar=False):
        """A second operand broadcasting with ``name``: another value, a fresh input, a number or (with
        ``cpu_scalar``, for the operators that accept one on any device) a CPU 0-dim tensor."""
        value = self.values[name]
        choice = self.rng.random()
        if choice < 0.1:
            return self.number(value.dtype)
        if choice < 0.15 and cpu_scalar:
            return f"torch.tensor({self.number(value.dtype)})"
        if choice < 0.55:
            try:
                return self.tensor(
                    lambda other: _broadcasts(other.shape, value.shape) and (dtype is None or other.dtype == dtype)
                )
            except Reject:
                pass
        shape = list(value.shape[self.rng.randint(0, value.dim()) :])
        shape = [1 if self.rng.random() < 0.2 else size for size in shape]
        if dtype is None:
            dtype = value.dtype if self.rng.random() < 0.6 else self.rng.choice(_INPUT_DTYPES)
        return self.fresh(shape, dtype)

    def dim(self, name):
        ndim = max(self.values[name].dim(), 1)
        return self.rng.randint(-ndim, ndim - 1)

    def number(self, dtype=torch.float32):
        if dtype == torch.bool:
            return self.rng.choice(["True", "False"])
        if dtype.is_floating_point or dtype.is_complex:
            return self.rng.choice(["0.5", "-1.5", "2.0", "3", "-2", "0.0"])
        return self.rng.choice(["2", "-3", "1", "0", "5"])

    def out(self, like):
        """An ``out=`` tensor for a result like the value ``like``: empty (resized by the kernel) or strided as it."""
        if self.rng.random() < 0.5:
            return f"torch.empty(0, dtype={self.values[like].dtype}, device=device)"
        return f"torch.empty_like({like}, requires_grad=False)"


def _broadcasts(a, b):
    try:
        torch.broadcast_shapes(a, b)
        return True
    except RuntimeError:
        return False


def _evaluate(expression, scope):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return eval(expression, scope), None
    except Exception as error:  # noqa: BLE001 - an exception is an outcome to compare
        return None, error


@dataclass(frozen=True)
class Snapshot:
    """What is compared of a value: its metadata and its bits (a contiguous CPU copy)."""

    kind: str
    device: str = ""
    dtype: torch.dtype = None
    shape: tuple = ()
    stride: tuple = ()
    storage_offset: int = 0
    requires_grad: bool = False
    data: torch.Tensor = None
    error: str = ""

    @classmethod
    def of(cls, value, error=None):
        if error is not None:
            return cls("raised", error=f"{type(error).__name__}: {_first_line(error)}")
        if not isinstance(value, torch.Tensor):
            return cls(type(value).__name__, error=repr(value))
        data = value.detach().resolve_conj().resolve_neg().to("cpu", copy=True).contiguous()
        return cls(
            "tensor",
            value.device.type,
            value.dtype,
            tuple(value.shape),
            value.stride(),
            value.storage_offset(),
            value.requires_grad,
            data,
        )

    def difference(self, expected):
        """None, or how this (openreg) snapshot differs from the CPU's ``expected``."""
        if self.kind != expected.kind:
            return f"openreg gave {self.kind} {self.error}, CPU gave {expected.kind} {expected.error}".strip()
        if self.kind == "raised":
            # Both raised: the same exception type is agreement, messages may name the device.
            same = self.error.split(":")[0] == expected.error.split(":")[0]
            return None if same else f"openreg raised {self.error}, CPU raised {expected.error}"
        if self.kind != "tensor":
            return None if self.error == expected.error else f"openreg gave {self.error}, CPU gave {expected.error}"
        device = DEVICE if expected.device == "cpu" else expected.device
        for field, want in (
            ("device", device),
            ("dtype", expected.dtype),
            ("shape", expected.shape),
            ("stride", expected.stride),
            ("storage_offset", expected.storage_offset),
            ("requires_grad", expected.requires_grad),
        ):
            if getattr(self, field) != want:
                return f"{field} {getattr(self, field)} on openreg, {want} on the CPU"
        mismatches = _bit_mismatches(self.data, expected.data)
        if mismatches:
            return f"{mismatches} of {self.data.numel()} elements differ in their bits"
        return None


def _bit_mismatches(actual, expected):
    """How many elements differ bitwise (NaN equals NaN whatever its payload and sign)."""
    if actual.is_complex():
        actual, expected = torch.view_as_real(actual), torch.view_as_real(expected)
    if not actual.dtype.is_floating_point:
        return int((actual != expected).sum())
    bits = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[actual.element_size()]
    differ = actual.view(bits) != expected.view(bits)
    return int((differ & ~(actual.isnan() & expected.isnan())).sum())


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _execute(program, device, extra=None, after_line=None):
    """Runs ``program``'s lines on ``device`` (seeded by its seed); returns the variables that got a value.

    ``after_line(value, error)`` is called after each line.
    """
    torch.manual_seed(program.seed)
    scope = namespace(device, extra)
    for line in program.lines:
        value, error = _evaluate(line.expression, scope)
        if error is None:
            scope[line.name] = value
        if after_line is not None:
            after_line(value, error)
    return {line.name: scope[line.name] for line in program.lines if line.name in scope}


def run(program, device, extra=None):
    """Runs ``program`` on ``device``: the snapshot after each line, then the final snapshot of each variable."""
    after_line = []
    variables = _execute(program, device, extra, lambda value, error: after_line.append(Snapshot.of(value, error)))
    final = [Snapshot.of(variables[line.name]) if line.name in variables else None for line in program.lines]
    return after_line, final


def run_on_cpu(program, extra=None):
    """The values of ``program``'s variables after a CPU run, by name."""
    return _execute(program, "cpu", extra)


def compare(program, extra=None):
    """The first ``Divergence`` between the CPU and openreg runs of ``program``, or None."""
    expected_lines, expected_final = run(program, "cpu", extra)
    with torch.openreg.cuda_contract.enabled(False):
        actual_lines, actual_final = run(program, DEVICE, extra)
    for final, expected_all, actual_all in (
        (False, expected_lines, actual_lines),
        (True, expected_final, actual_final),
    ):
        for index, (expected, actual) in enumerate(zip(expected_all, actual_all)):
            if expected is None and actual is None:
                continue
            message = "defined on one device only" if None in (expected, actual) else actual.difference(expected)
            if message:
                line = program.lines[index]
                return Divergence(index, line.name, line.op, message, final)
    return None


def assert_same_on_both(program_function):
    """Runs ``program_function(device)`` on the CPU and on openreg (seeded alike); the outcomes must agree."""
    snapshots = []
    with torch.openreg.cuda_contract.enabled(False):
        for device in ("cpu", DEVICE):
            value, error = _evaluate(
                "program_function(device)", {"program_function": program_function, "device": device}
            )
            snapshots.append(Snapshot.of(value, error))
    message = snapshots[1].difference(snapshots[0])
    if message:
        raise AssertionError(f"openreg differs from the CPU: {message}")
