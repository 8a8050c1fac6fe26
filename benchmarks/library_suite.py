"""The library test-suite case of the benchmark suite: real models as a library's tests exercise them, each test in
a fresh process, on openreg and on the CPU.

    python benchmarks/library_suite.py --model timm/resnet18 --device openreg    # one test; seconds as JSON

A "test" builds the model (seeded), moves it to the device, and runs two training iterations (forward, backward,
one AdamW step each) on a small batch, the way timm's and transformers' own tests exercise a model; its time runs
from after the imports to the last result on the host. The libraries are an optional extra (`pip install
".[benchmark-libraries]"`); timm needs a torchvision built for the installed torch. benchmarks/run.py calls
measure(), which runs every test of an installed library in processes of its own, openreg's and the CPU's
alternating, and reports each test's median and the suite's total (the sum of the medians).
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

# timm: five families a vision library tests (residual, depthwise, squeeze-excitation, transformer, ConvNeXt),
# at 96x96. transformers: three tiny configurations, as its tests build them (no weights downloaded).
TIMM_MODELS = ["resnet18", "mobilenetv3_small_050", "efficientnet_b0", "vit_tiny_patch16_224", "convnext_atto"]
TRANSFORMERS_MODELS = ["bert", "gpt2", "t5"]
TESTS = [f"timm/{name}" for name in TIMM_MODELS] + [f"transformers/{name}" for name in TRANSFORMERS_MODELS]
PROCESSES = (3, 1)  # per test and device: full run, --quick
TIMEOUT_S = 600


def library_of(test):
    return test.split("/", 1)[0]


def available(library):
    """Whether `library` imports here (timm also needs a torchvision that loads beside this torch)."""
    if importlib.util.find_spec(library) is None:
        return False
    probe = subprocess.run([sys.executable, "-c", f"import {library}"], capture_output=True, timeout=TIMEOUT_S)
    return probe.returncode == 0


def model_factory(torch, test):
    """A callable building (model, inputs as keyword arguments, loss of the outputs) of one test on the CPU, its
    library's modules imported (a test suite pays that once per process, before its tests)."""
    library, name = test.split("/", 1)
    batch = 2
    if library == "timm":
        import timm

        extra = {"img_size": 96} if name.startswith("vit") else {}
        timm.create_model(name, pretrained=False, num_classes=10, **extra)  # imports the model's module

        def build_timm():
            model = timm.create_model(name, pretrained=False, num_classes=10, **extra)
            labels = torch.randint(0, 10, (batch,))
            return (
                model,
                {"x": torch.randn(batch, 3, 96, 96)},
                lambda out, device: torch.nn.functional.cross_entropy(out, labels.to(device)),
            )

        return build_timm
    import transformers

    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=1000,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
            num_labels=3,
        )
        model_class = transformers.BertForSequenceClassification
    elif name == "gpt2":
        config = transformers.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        model_class = transformers.GPT2LMHeadModel
    else:
        config = transformers.T5Config(
            vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, decoder_start_token_id=0
        )
        model_class = transformers.T5ForConditionalGeneration

    def build_transformer():
        tokens = torch.randint(0, 1000, (batch, 32))
        labels = {"bert": torch.tensor([0, 2]), "gpt2": tokens, "t5": tokens[:, :16].contiguous()}[name]
        return model_class(config), {"input_ids": tokens, "labels": labels}, lambda out, device: out.loss

    return build_transformer


def run_test(test, device):
    """Seconds one test takes on `device`, from after the imports."""
    import torch

    build = model_factory(torch, test)
    start = time.perf_counter()
    torch.manual_seed(0)
    model, inputs, loss_of = build()
    model = model.to(device).train()
    inputs = {key: value.to(device) for key, value in inputs.items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        optimizer.zero_grad()
        loss = loss_of(model(**inputs), device)
        loss.backward()
        optimizer.step()
    loss.item()  # the host waits for the device's last result
    return time.perf_counter() - start


def measure(quick, env=None):
    """{"library_suite": {case: result}} for every installed library's tests, in run.py's result format, or {}."""
    import run  # benchmarks/run.py, beside this script

    libraries = {library: available(library) for library in {library_of(test) for test in TESTS}}  # one probe each
    tests = [test for test in TESTS if libraries[library_of(test)]]
    if not tests:
        return {}
    measured = {}
    for test in tests:
        samples = {"openreg": [], "cpu": []}
        for _ in range(PROCESSES[1 if quick else 0]):
            for device in samples:
                samples[device].append(one_process(test, device, env))
        measured[test] = samples
    cases = {
        test.replace("/", "_"): run.case_result(
            "library_suite", f"{test}: build, to(device), 2 AdamW steps", samples["openreg"], samples["cpu"], {}
        )
        for test, samples in measured.items()
    }
    totals = {
        device: sum(statistics.median(samples[device]) for samples in measured.values())
        for device in ("openreg", "cpu")
    }
    cases["total"] = run.case_result(
        "library_suite", f"all {len(tests)} tests (sum of the medians)", [totals["openreg"]], [totals["cpu"]], {}
    )
    return {"library_suite": cases}


def one_process(test, device, env):
    command = [sys.executable, os.path.abspath(__file__), "--model", test, "--device", device]
    proc = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=True, timeout=TIMEOUT_S)
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]


def main():
    parser = argparse.ArgumentParser(description="one library test on one device, in this process")
    parser.add_argument("--model", choices=TESTS, required=True)
    parser.add_argument("--device", choices=("openreg", "cpu"), required=True)
    args = parser.parse_args()
    print(json.dumps({"test": args.model, "device": args.device, "seconds": run_test(args.model, args.device)}))


if __name__ == "__main__":
    main()
