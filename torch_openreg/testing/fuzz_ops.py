"""The operators the differential fuzzer draws from.

An operator renders one line of Python from a ``fuzz.Picker`` (operands chosen among the program's values, fresh
inputs, numbers, dims); its variants (function, method, in-place, ``out=``) are picked at random. A render that
finds no fitting operand raises ``Reject``; a line the CPU rejects is dropped by the generator, so renders may
propose arguments that do not fit (mismatched shapes, dtypes) without checking everything up front.
Nondeterministic operators are not listed; random operators are, since each device's generator is seeded alike
and openreg's generators use the CPU's algorithm.
"""

from dataclasses import dataclass

import torch


class Reject(Exception):
    """The operator has no fitting operands in this program."""


@dataclass(frozen=True)
class Operator:
    name: str
    render: object  # Picker -> str


def _floating(value):
    return value.dtype.is_floating_point


def _numeric(value):
    return value.dtype.is_floating_point or value.dtype.is_complex or _integral(value)


def _integral(value):
    return not value.dtype.is_floating_point and not value.dtype.is_complex and value.dtype != torch.bool


def _small(value):
    """Few elements: for operators whose result grows with the square of the input."""
    return value.numel() <= 64


def _real(value):
    return not value.dtype.is_complex


def _call(p, function, operands, arguments="", method=True, inplace=False, out=False):
    """One of ``function(operands, arguments)``, the method, the in-place method or the ``out=`` form."""
    variants = (
        ["function"]
        + ["method"] * (method and function.startswith("torch."))
        + ["inplace"] * bool(inplace)
        + ["out"] * bool(out)
    )
    variant = p.rng.choice(variants)
    extra = ", ".join(filter(None, [", ".join(operands[1:]), arguments]))
    short = function.rsplit(".", 1)[1]
    if variant == "method":
        return f"{operands[0]}.{short}({extra})"
    if variant == "inplace":
        return f"{operands[0]}.{inplace if isinstance(inplace, str) else short + '_'}({extra})"
    every = ", ".join(filter(None, [", ".join(operands), arguments]))
    if variant == "out":
        return f"{function}({every}, out={p.out(operands[0])})"
    return f"{function}({every})"


def _unary(function, where=_floating, **variants):
    variants.setdefault("inplace", True)
    variants.setdefault("out", True)
    return Operator(function.rsplit(".", 1)[1], lambda p: _call(p, function, [p.tensor(where)], **variants))


def _binary(function, where=_numeric, **variants):
    def render(p):
        first = p.tensor(where)
        # Binary TensorIterator operators take a CPU 0-dim tensor with a tensor of any device (as CUDA does).
        return _call(p, function, [first, p.partner(first, cpu_scalar=True)], **variants)

    variants.setdefault("inplace", True)
    variants.setdefault("out", True)
    return Operator(function.rsplit(".", 1)[1], render)


def _with_arguments(name, function, where, arguments, **variants):
    """An operator whose extra arguments depend on its first operand: ``arguments(p, name) -> str``."""

    def render(p):
        first = p.tensor(where)
        return _call(p, function, [first], arguments(p, first), **variants)

    return Operator(name, render)


def _reduction(function, where=_numeric, keepdim=True, **variants):
    def arguments(p, x):
        if p.rng.random() < 0.3 and function not in ("torch.cumsum", "torch.cumprod", "torch.logsumexp"):
            return ""
        dim = p.dim(x)
        return f"dim={dim}" + (f", keepdim={p.rng.random() < 0.5}" if keepdim else "")

    return _with_arguments(function.rsplit(".", 1)[1], function, where, arguments, **variants)


def _one_of_two(name, function, arguments):
    """Values or indices of an operator returning both (``torch.max(x, dim)``, ``torch.sort``, ...)."""

    def render(p):
        x = p.tensor(_real)
        return f"{function}({x}, {arguments(p, x)})[{p.rng.randint(0, 1)}]"

    return Operator(name, render)


UNARY = [
    _unary(f"torch.{name}")
    for name in (
        "abs",
        "neg",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "sigmoid",
        "erf",
        "erfc",
        "erfinv",
        "reciprocal",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "sign",
        "lgamma",
        "digamma",
        "i0",
        "sinc",
        "deg2rad",
        "rad2deg",
        "square",
        "logit",
        "nan_to_num",
        "relu",
        "sgn",
        "positive",
    )
] + [
    _unary("torch.abs", _numeric),
    _unary("torch.neg", lambda v: _numeric(v) and v.dtype != torch.uint8),
    _unary("torch.signbit", _real, inplace=False),
    _unary("torch.isnan", _numeric, inplace=False, out=False),
    _unary("torch.isinf", _numeric, inplace=False, out=False),
    _unary("torch.isfinite", _numeric, inplace=False, out=False),
    _unary("torch.logical_not", None),
    _unary("torch.bitwise_not", lambda v: not v.dtype.is_floating_point and not v.dtype.is_complex),
    _unary("torch.angle", None, inplace=False),
    _unary("torch.conj_physical", None),
]

ACTIVATIONS = [
    _unary(f"F.{name}", inplace=False, out=False)
    for name in (
        "relu6",
        "selu",
        "celu",
        "hardswish",
        "hardsigmoid",
        "softsign",
        "tanhshrink",
        "logsigmoid",
        "silu",
        "mish",
        "elu",
    )
] + [
    _with_arguments(
        "gelu", "F.gelu", _floating, lambda p, x: f"approximate={p.rng.choice(['none', 'tanh'])!r}", method=False
    ),
    _with_arguments("leaky_relu", "F.leaky_relu", _floating, lambda p, x: p.rng.choice(["", "0.2"]), method=False),
    _with_arguments("hardtanh", "F.hardtanh", _floating, lambda p, x: "-0.5, 1.5", method=False),
    _with_arguments(
        "softplus", "F.softplus", _floating, lambda p, x: p.rng.choice(["", "beta=2, threshold=1"]), method=False
    ),
    _with_arguments("hardshrink", "F.hardshrink", _floating, lambda p, x: "0.5", method=False),
    _with_arguments("softshrink", "F.softshrink", _floating, lambda p, x: "0.5", method=False),
    _with_arguments("threshold", "F.threshold", _floating, lambda p, x: "0.1, -2.0", method=False),
    _with_arguments("softmax", "torch.softmax", _floating, lambda p, x: f"{p.dim(x)}"),
    _with_arguments("log_softmax", "torch.log_softmax", _floating, lambda p, x: f"{p.dim(x)}"),
    _with_arguments("glu", "F.glu", _floating, lambda p, x: f"{p.dim(x)}", method=False),
    _with_arguments("normalize", "F.normalize", _floating, lambda p, x: f"dim={p.dim(x)}", method=False),
]

BINARY = [
    _binary(f"torch.{name}")
    for name in (
        "add",
        "sub",
        "mul",
        "div",
        "true_divide",
        "floor_divide",
        "remainder",
        "fmod",
        "pow",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "atan2",
        "hypot",
        "copysign",
        "nextafter",
        "xlogy",
        "logaddexp",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_left_shift",
        "bitwise_right_shift",
        "gcd",
        "lcm",
        "heaviside",
        "float_power",
    )
] + [
    _binary("torch.add", arguments="alpha=2"),
    _binary("torch.sub", arguments="alpha=-1"),
    _binary("torch.div", arguments="rounding_mode='floor'"),
    _binary("torch.div", arguments="rounding_mode='trunc'"),
]


def _where(p):
    condition = p.tensor(lambda v: v.dtype == torch.bool)
    return f"torch.where({condition}, {p.partner(condition)}, {p.partner(condition)})"


def _ternary(name, template, where=_floating):
    def render(p):
        first = p.tensor(where)
        return template.format(first, p.partner(first), p.partner(first), number=p.number(p[first].dtype))

    return Operator(name, render)


TERNARY = [
    Operator("where", _where),
    _ternary("lerp", "torch.lerp({0}, {1}, 0.3)"),
    _ternary("lerp_", "{0}.lerp_({1}, {2})"),
    _ternary("addcmul", "torch.addcmul({0}, {1}, {2}, value={number})", _numeric),
    _ternary("addcmul_", "{0}.addcmul_({1}, {2})", _numeric),
    _ternary("addcdiv", "torch.addcdiv({0}, {1}, {2}, value={number})"),
    _ternary("clamp", "torch.clamp({0}, {1}, {2})", _real),
    _ternary("clamp_scalar", "torch.clamp({0}, min=-1, max={number})", _real),
    _ternary("clamp_", "{0}.clamp_(max={number})", _real),
    _ternary("masked_fill", "{0}.masked_fill({1} > 0, {number})", _numeric),
    _ternary("masked_fill_", "{0}.masked_fill_({1} < 0, {number})", _numeric),
    _ternary("copy_", "{0}.copy_({1})", None),
    _ternary("fill_", "{0}.fill_({number})", None),
    _ternary("zero_", "{0}.zero_()", None),
]

REDUCTIONS = (
    [
        _reduction(f"torch.{name}", **variants)
        for name, variants in (
            ("sum", {"out": True}),
            ("mean", {}),
            ("prod", {}),
            ("amax", {}),
            ("amin", {}),
            ("std", {}),
            ("var", {}),
            ("nansum", {}),
            ("nanmean", {}),
            ("logsumexp", {}),
            ("count_nonzero", {"keepdim": False}),
            ("cumsum", {"keepdim": False, "inplace": True}),
            ("cumprod", {"keepdim": False}),
            ("argmax", {}),
            ("argmin", {}),
            ("all", {}),
            ("any", {}),
            ("norm", {}),
        )
    ]
    + [
        _one_of_two(f"{name}.dim", f"torch.{name}", lambda p, x: f"{p.dim(x)}, {p.rng.random() < 0.5}")
        for name in ("max", "min", "median", "mode", "sort")
    ]
    + [_one_of_two(f"{name}.dim", f"torch.{name}", lambda p, x: f"{p.dim(x)}") for name in ("cummax", "cummin")]
    + [
        _one_of_two("aminmax", "torch.aminmax", lambda p, x: f"dim={p.dim(x)}, keepdim={p.rng.random() < 0.5}"),
        _one_of_two("topk", "torch.topk", lambda p, x: f"1, {p.dim(x)}"),
        _one_of_two("kthvalue", "torch.kthvalue", lambda p, x: f"1, {p.dim(x)}"),
        _with_arguments("argsort", "torch.argsort", _real, lambda p, x: f"dim={p.dim(x)}, stable=True"),
        _with_arguments("sum.dtype", "torch.sum", None, lambda p, x: "dtype=torch.float64"),
        _with_arguments("mean.dim", "torch.mean", _floating, lambda p, x: f"({p.dim(x)},), dtype=torch.float64"),
    ]
)


def _view(name, template, where=None):
    def render(p):
        x = p.tensor(where)
        value = p[x]
        dims = list(range(value.dim()))
        p.rng.shuffle(dims)
        return template.format(
            x,
            dim=p.dim(x),
            dim2=p.dim(x),
            perm=tuple(dims),
            n=max(value.shape[:1] or (1,)),
            half=(value.numel() - 1) // 2,
        )

    return Operator(name, render)


VIEWS = [
    _view("transpose", "{0}.transpose({dim}, {dim2})"),
    _view("t", "{0}.t()"),
    _view("permute", "{0}.permute{perm}"),
    _view("reshape", "{0}.reshape(-1)"),
    _view("view", "{0}.view(-1, {n})"),
    _view("narrow", "{0}.narrow({dim}, 0, 1)"),
    _view("select", "{0}.select({dim}, -1)"),
    _view("slice", "{0}[1:]"),
    _view("step_slice", "{0}[..., ::2]"),
    _view("unsqueeze", "{0}.unsqueeze({dim})"),
    _view("squeeze", "{0}.squeeze()"),
    _view("expand", "{0}.unsqueeze(0).expand(2, *{0}.shape)"),
    _view("flatten", "{0}.flatten()"),
    _view("unflatten", "{0}.flatten().unflatten(0, (1, -1))"),
    _view("diagonal", "{0}.diagonal(0, {dim}, {dim2})"),
    _view("movedim", "{0}.movedim({dim}, {dim2})"),
    _view("unfold", "{0}.unfold({dim}, 2, 1)"),
    _view("chunk", "{0}.chunk(2, {dim})[-1]"),
    _view("split", "{0}.split(1, {dim})[0]"),
    _view("mT", "{0}.mT"),
    # Within the elements of a fresh storage: what lies beyond a tensor's elements is unspecified.
    _view("as_strided", "{0}.flatten().clone().as_strided(({half},), (2,), 1)", lambda v: v.numel() >= 3),
    _view("view_as_real", "torch.view_as_real({0})", lambda v: v.dtype.is_complex),
    _view("view_dtype", "{0}.view(torch.int32)", lambda v: v.dtype.itemsize == 4),
    _view("real", "{0}.real", lambda v: v.dtype.is_complex),
]


def _index(p, x):
    """A 1-d int64 index tensor with entries valid along dim 0 of ``x``."""
    size = max(p[x].shape[0] if p[x].dim() else 1, 1)
    return f"torch.remainder({p.fresh((p.rng.randint(1, 4),), torch.int64, 'contiguous')}, {size})"


def _positions(p, x, dim):
    """An int64 index tensor shaped like ``x`` with entries valid along ``dim``."""
    size = max(p[x].shape[dim] if p[x].dim() else 1, 1)
    return f"torch.remainder({p.fresh(tuple(p[x].shape), torch.int64)}, {size})"


def _copying(name, template, where=None):
    def render(p):
        x = p.tensor(where)
        value = p[x]
        dim = p.dim(x)
        return template.format(
            x,
            other=p.partner(x, value.dtype),
            dim=dim,
            number=p.number(value.dtype),
            index=_index(p, x),
            positions=_positions(p, x, dim) if value.dim() else "",
            mask=f"({p.partner(x)} > 0)",
            fresh_like=p.fresh(tuple(value.shape), value.dtype),
            dtype=p.rng.choice(
                [
                    "torch.float32",
                    "torch.float64",
                    "torch.int64",
                    "torch.bool",
                    "torch.float16",
                    "torch.bfloat16",
                    "torch.int8",
                ]
            ),
        )

    return Operator(name, render)


COPYING = [
    _copying("contiguous", "{0}.contiguous()"),
    _copying("clone", "{0}.clone()"),
    _copying("clone.preserve", "{0}.clone(memory_format=torch.preserve_format)"),
    _copying("channels_last", "{0}.contiguous(memory_format=torch.channels_last)", lambda v: v.dim() == 4),
    _copying("cat", "torch.cat([{0}, {other}], {dim})"),
    _copying("cat.out", "torch.cat([{0}, {fresh_like}], {dim}, out=torch.empty(0, dtype={0}.dtype, device=device))"),
    _copying("stack", "torch.stack([{0}, {fresh_like}], {dim})"),
    _copying("flip", "{0}.flip({dim})"),
    _copying("roll", "{0}.roll(2, {dim})"),
    _copying("repeat", "{0}.repeat(2, *[1] * {0}.dim())"),
    _copying("tile", "{0}.tile((2,))"),
    _copying("tril", "{0}.tril()"),
    _copying("triu_", "{0}.triu_(1)"),
    _copying("gather", "{0}.gather({dim}, {positions})"),
    _copying("scatter", "{0}.scatter({dim}, {positions}, {fresh_like})"),
    _copying("scatter_add_", "{0}.scatter_add_({dim}, {positions}, {fresh_like})"),
    _copying("scatter.reduce", "{0}.scatter_reduce({dim}, {positions}, {fresh_like}, 'amax')"),
    _copying("index_select", "{0}.index_select(0, {index})"),
    _copying("index_add", "{0}.index_add(0, torch.arange(1, device=device), {0}[:1])"),
    _copying("index_fill_", "{0}.index_fill_(0, {index}, {number})"),
    _copying("index_put", "{0}.index_put(({index},), torch.tensor({number}, dtype={0}.dtype, device=device))"),
    _copying(
        "index_put.accumulate",
        "{0}.index_put(({index},), torch.tensor({number}, dtype={0}.dtype, device=device), accumulate=True)",
    ),
    _copying("getitem.index", "{0}[{index}]"),
    _copying("getitem.mask", "{0}[{mask}]"),
    _copying("setitem.mask", "{0}.masked_fill_({mask}, {number})"),
    _copying("masked_select", "torch.masked_select({0}, {mask})"),
    _copying("masked_scatter", "{0}.masked_scatter({mask}, {fresh_like})"),
    _copying("nonzero", "torch.nonzero({0})"),
    _copying("take", "torch.take({0}, {index})"),
    _copying("repeat_interleave", "{0}.repeat_interleave(2, {dim})"),
    _copying("pad", "F.pad({0}, (1, 2))"),
    _copying("pad.reflect", "F.pad({0}, (1, 1), mode='reflect')"),
    _copying("to", "{0}.to({dtype})"),
    _copying("type_as", "{0}.type_as({other})"),
    _copying("diag", "torch.diag({0})", lambda v: v.dim() in (1, 2) and _small(v)),
    _copying("diag_embed", "torch.diag_embed({0})", _small),
    _copying("trace", "torch.trace({0})", lambda v: v.dim() == 2),
    _copying("outer", "torch.outer({0}.flatten(), {other}.flatten())", _small),
    _copying("kron", "torch.kron({0}, {fresh_like})", _small),
    _copying("searchsorted", "torch.searchsorted({0}.flatten().sort()[0], {other})", _real),
    _copying("bucketize", "torch.bucketize({0}, {other}.flatten().sort()[0])", _real),
    _copying("bincount", "torch.bincount(torch.remainder({0}.flatten(), 7))", _integral),
    _copying("histc", "torch.histc({0}, bins=5, min=-2, max=2)", _floating),
    _copying("unique", "torch.unique({0}, sorted=True)", _real),
    _copying("unique.dim", "torch.unique({0}, dim={dim})", _real),
    _copying("cross", "torch.linalg.cross({0}, {fresh_like}, dim={dim})"),
    _copying("cdist", "torch.cdist({0}, {fresh_like})", lambda v: _floating(v) and _small(v)),
]


def _matmul(name, template, where=_floating):
    def render(p):
        x = p.tensor(where)
        value = p[x]
        if value.dim() < 1:
            raise Reject
        rows = value.shape[-1]
        n = p.rng.randint(1, 5)
        return template.format(
            x,
            right=p.fresh((rows, n), value.dtype),
            batch_right=p.fresh(tuple(value.shape[:-2]) + (rows, n), value.dtype),
            vector=p.fresh((rows,), value.dtype),
            weight=p.fresh((n, rows), value.dtype),
            bias=p.fresh((n,), value.dtype),
            other=p.fresh(tuple(value.shape), value.dtype),
        )

    return Operator(name, render)


LINEAR_ALGEBRA = [
    _matmul("mm", "torch.mm({0}, {right})"),
    _matmul("mm.out", "torch.mm({0}, {right}, out=torch.empty(0, dtype={0}.dtype, device=device))"),
    _matmul("matmul", "torch.matmul({0}, {right})"),
    _matmul("matmul.batched", "{0} @ {batch_right}"),
    _matmul("bmm", "torch.bmm({0}, {batch_right})"),
    _matmul("addmm", "torch.addmm({bias}, {0}, {right}.mT.mT, beta=0.5, alpha=2)"),
    _matmul("mv", "torch.mv({0}, {vector})"),
    _matmul("dot", "torch.dot({0}, {other})"),
    _matmul("linear", "F.linear({0}, {weight}, {bias})"),
    _matmul("matmul.int", "torch.matmul({0}, {right})", _integral),
    _matmul("einsum", "torch.einsum('...i,ij->...j', {0}, {right})"),
]


def _nn(name, template, where=_floating, ndim=None):
    def render(p):
        x = p.tensor(lambda v: (where is None or where(v)) and (ndim is None or v.dim() in ndim))
        value = p[x]
        channels = value.shape[1] if value.dim() > 1 else 1
        last = value.shape[-1] if value.dim() else 1
        return template.format(
            x,
            dtype=value.dtype,
            channels=channels,
            last=last,
            dim=p.dim(x),
            weight1=p.fresh((2, channels, 2), value.dtype),
            weight2=p.fresh((2, channels, 2, 2), value.dtype),
            per_channel=p.fresh((channels,), value.dtype, "contiguous"),
            affine=p.fresh((last,), value.dtype, "contiguous"),
            target=p.fresh(tuple(value.shape), value.dtype),
            classes=f"torch.remainder({p.fresh((value.shape[0] if value.dim() else 1,), torch.int64)}, {channels})",
        )

    return Operator(name, render)


NN = [
    _nn("conv1d", "F.conv1d({0}, {weight1})", ndim=(3,)),
    _nn("conv1d.padding", "F.conv1d({0}, {weight1}, padding=1, stride=2)", ndim=(3,)),
    _nn("conv2d", "F.conv2d({0}, {weight2}, padding=1)", ndim=(4,)),
    _nn("max_pool1d", "F.max_pool1d({0}, 2)", ndim=(2, 3)),
    _nn("max_pool2d", "F.max_pool2d({0}, 2, ceil_mode=True)", _real, ndim=(3, 4)),
    _nn("avg_pool2d", "F.avg_pool2d({0}, 2)", ndim=(3, 4)),
    _nn("adaptive_avg_pool2d", "F.adaptive_avg_pool2d({0}, 1)", ndim=(3, 4)),
    _nn("layer_norm", "F.layer_norm({0}, ({last},), {affine}, {affine})"),
    _nn("layer_norm.plain", "F.layer_norm({0}, ({last},))"),
    _nn("batch_norm.eval", "F.batch_norm({0}, {per_channel}, {per_channel}.abs() + 1, training=False)", ndim=(2, 3, 4)),
    _nn(
        "batch_norm.train", "F.batch_norm({0}, None, None, {per_channel}, {per_channel}, training=True)", ndim=(2, 3, 4)
    ),
    _nn("group_norm", "F.group_norm({0}, 1)", ndim=(2, 3, 4)),
    _nn(
        "embedding",
        "F.embedding(torch.remainder({0}, 4).long(), torch.arange(12.0, device=device).view(4, 3))",
        _integral,
    ),
    _nn("mse_loss", "F.mse_loss({0}, {target})"),
    _nn("l1_loss", "F.l1_loss({0}, {target}, reduction='sum')"),
    _nn("smooth_l1_loss", "F.smooth_l1_loss({0}, {target})"),
    _nn("bce_with_logits", "F.binary_cross_entropy_with_logits({0}, {target}.sigmoid())"),
    _nn("cross_entropy", "F.cross_entropy({0}, {classes})", ndim=(2,)),
    _nn("nll_loss", "F.nll_loss({0}.log_softmax(1), {classes}, reduction='sum')", ndim=(2,)),
    _nn("dropout", "F.dropout({0}, 0.3, training=True)"),
    _nn("dropout.native", "torch.native_dropout({0}, 0.5, True)[1]"),
    _nn("bernoulli", "torch.bernoulli({0}.sigmoid())"),
    _nn("bernoulli_", "{0}.bernoulli_(0.25)", None),
    _nn("rand_like", "torch.rand_like({0})"),
    _nn("randn_like", "torch.randn_like({0})"),
    _nn("randint_like", "torch.randint_like({0}, 10)", _real),
    _nn("normal_", "{0}.normal_()"),
    _nn("uniform_", "{0}.uniform_(-1, 1)"),
    _nn("exponential_", "{0}.exponential_()"),
    _nn("multinomial", "torch.multinomial({0}.abs().flatten().nan_to_num() + 0.1, 2)"),
    _nn("randperm", "torch.randperm({last}, device=device)", None),
]


def _grad(p):
    output = p.tensor(lambda v: v.requires_grad and v.dtype.is_floating_point)
    source = p.tensor(lambda v: v.requires_grad)
    value = p[output]
    return (
        f"torch.autograd.grad({output}, {source}, {p.fresh(tuple(value.shape), value.dtype, 'contiguous')}, "
        "retain_graph=True, allow_unused=True)[0]"
    )


AUTOGRAD = [Operator("grad", _grad)] * 12

OPERATORS = tuple(
    UNARY + ACTIVATIONS + BINARY + TERNARY + REDUCTIONS + VIEWS + COPYING + LINEAR_ALGEBRA + NN + AUTOGRAD
)
