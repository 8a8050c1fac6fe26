"""The CI slice (``--quick``): a fixed, representative selection that runs in a few minutes."""

# 72 operators across families: elementwise unary/binary, comparisons,
# reductions, indexing/scatter, shape and view operators, linear algebra,
# convolution/pooling/normalization, factories, random, sorting and FFT.
OPS = frozenset(
    {
        "abs",
        "neg",
        "exp",
        "log",
        "sqrt",
        "sin",
        "tanh",
        "sigmoid",
        "floor",
        "round",
        "add",
        "sub",
        "mul",
        "div.no_rounding_mode",
        "pow",
        "remainder",
        "maximum",
        "bitwise_and",
        "eq",
        "lt",
        "isnan",
        "where",
        "clamp",
        "lerp",
        "sum",
        "mean",
        "prod",
        "amax",
        "argmax",
        "var",
        "cumsum",
        "any",
        "all",
        "index_select",
        "gather",
        "scatter_add",
        "index_put",
        "masked_fill",
        "nonzero",
        "take",
        "cat",
        "stack",
        "reshape",
        "transpose",
        "permute",
        "expand",
        "narrow",
        "flip",
        "repeat",
        "split",
        "unique",
        "matmul",
        "mm",
        "addmm",
        "bmm",
        "linalg.vector_norm",
        "linalg.solve",
        "nn.functional.conv2d",
        "nn.functional.max_pool2d",
        "nn.functional.layer_norm",
        "softmax",
        "nn.functional.cross_entropy",
        "nn.functional.embedding",
        "arange",
        "full",
        "zeros_like",
        "randn",
        "bernoulli",
        "nn.functional.dropout",
        "sort",
        "topk",
        "fft.fft",
    }
)
OP_DTYPES = ("float32", "int64", "bool")
MAX_SAMPLES = 3

MODULES = frozenset(
    {
        "nn.Linear",
        "nn.Conv2d",
        "nn.BatchNorm2d",
        "nn.LayerNorm",
        "nn.Embedding",
        "nn.LSTM",
        "nn.MultiheadAttention",
        "nn.ReLU",
        "nn.GELU",
        "nn.CrossEntropyLoss",
    }
)
MODULE_DTYPES = ("float32",)
MAX_MODULE_INPUTS = 3
OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS"})

# The compile suite's slice: pointwise, reduction, softmax and norm, matmul, convolution, views, indexing and
# random operators, compiled forward and backward, one sample each.
COMPILE_OPS = frozenset(
    {
        "add",
        "sin",
        "sum",
        "softmax",
        "nn.functional.layer_norm",
        "addmm",
        "nn.functional.conv2d",
        "transpose",
        "index_select",
        "nn.functional.dropout",
    }
)
COMPILE_DTYPES = ("float32",)
COMPILE_MAX_SAMPLES = 1
