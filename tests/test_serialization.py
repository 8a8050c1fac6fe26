"""torch.save / torch.load of openreg tensors, storages, module and optimizer
state dicts: devices and map_location in every form, aliasing of views,
weights_only loading, and backend metadata. Values are checked against the
CPU tensors they came from."""

import copy
import io
import pickle
import warnings

import pytest
import torch

from conftest import ALL_DTYPES, DEVICE, assert_same, dtype_id, make_cpu


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.fixture(params=["bytesio", "file"])
def round_trip(request, tmp_path):
    """save + load through an in-memory buffer or a file on disk."""
    if request.param == "bytesio":
        return _round_trip

    def through_file(obj, **load_kwargs):
        path = tmp_path / "checkpoint.pt"
        torch.save(obj, path)
        return torch.load(path, **load_kwargs)

    return through_file


# --------------------------------------------------------------------------
# tensors and storages
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_tensor_round_trip_keeps_device_and_values(round_trip, dtype):
    cpu0 = make_cpu((5, 7), dtype=dtype, seed=1)
    cpu1 = make_cpu((3,), dtype=dtype, seed=2)
    loaded = round_trip({"a": cpu0.to("openreg:0"), "b": cpu1.to("openreg:1")})
    assert loaded["a"].device == torch.device("openreg:0")
    assert loaded["b"].device == torch.device("openreg:1")
    assert_same(loaded["a"], cpu0)
    assert_same(loaded["b"], cpu1)


def test_scalar_and_empty_tensors(round_trip):
    scalar = torch.tensor(3.5)
    empty = torch.empty(0, 4, dtype=torch.int64)
    loaded = round_trip([scalar.to(DEVICE), empty.to(DEVICE)])
    assert_same(loaded[0], scalar)
    assert_same(loaded[1], empty)


def test_views_keep_sharing_one_storage(round_trip):
    base_cpu = make_cpu((4, 6), seed=3)
    base = base_cpu.to(DEVICE)
    views = {"base": base, "t": base.t(), "row": base[2], "slice": base.view(-1)[5:17], "col": base[:, 1]}
    loaded = round_trip(views)
    ptr = loaded["base"].untyped_storage().data_ptr()
    for name, original in views.items():
        tensor = loaded[name]
        assert tensor.device == torch.device("openreg:0")
        assert tensor.untyped_storage().data_ptr() == ptr, name
        assert tensor.storage_offset() == original.storage_offset(), name
        assert tensor.stride() == original.stride(), name
    # aliasing: writing through one loaded view shows in the others, as on the CPU
    cpu_views = {"base": base_cpu.clone()}
    cpu_views.update(
        t=cpu_views["base"].t(),
        row=cpu_views["base"][2],
        slice=cpu_views["base"].view(-1)[5:17],
        col=cpu_views["base"][:, 1],
    )
    for views_ in (loaded, cpu_views):
        views_["row"].fill_(-1.0)
        views_["col"].mul_(10.0)
        views_["slice"].add_(0.5)
    for name in cpu_views:
        assert_same(loaded[name], cpu_views[name])


def test_views_on_two_devices(round_trip):
    a_cpu = make_cpu(10, seed=4)
    b_cpu = make_cpu(10, seed=5)
    a = a_cpu.to("openreg:0")
    b = b_cpu.to("openreg:1")
    loaded = round_trip([a, a[3:], b, b[::2]])
    assert loaded[0].untyped_storage().data_ptr() == loaded[1].untyped_storage().data_ptr()
    assert loaded[2].untyped_storage().data_ptr() == loaded[3].untyped_storage().data_ptr()
    assert loaded[3].device == torch.device("openreg:1")
    assert_same(loaded[1], a_cpu[3:])
    assert_same(loaded[3], b_cpu[::2])


def test_untyped_storage_round_trip(round_trip):
    cpu = make_cpu(16, dtype=torch.int32, seed=6)
    storage = cpu.to("openreg:1").untyped_storage()
    loaded = round_trip(storage)
    # torch.load returns storages as TypedStorage (uint8 for an untyped one), as on the CPU
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        untyped = loaded.untyped() if isinstance(loaded, torch.TypedStorage) else loaded
    assert untyped.device == torch.device("openreg:1")
    assert untyped.nbytes() == storage.nbytes()
    as_tensor = torch.empty(0, dtype=torch.int32, device="openreg:1").set_(untyped, 0, (16,), (1,))
    assert_same(as_tensor, cpu)
    assert bytes(untyped.cpu()) == bytes(cpu.untyped_storage())


def test_typed_storage_round_trip(round_trip):
    cpu = make_cpu(12, dtype=torch.float64, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        storage = cpu.to(DEVICE).storage()
        loaded = round_trip(storage)
    assert isinstance(loaded, torch.TypedStorage)
    assert loaded.device == torch.device("openreg:0")
    assert loaded.dtype == torch.float64
    assert loaded.tolist() == cpu.tolist()


# --------------------------------------------------------------------------
# map_location
# --------------------------------------------------------------------------


def _saved_on_both_devices():
    a = make_cpu((3, 4), seed=8)
    b = make_cpu((5,), dtype=torch.int64, seed=9)
    buf = io.BytesIO()
    x = a.to("openreg:0")
    torch.save({"a": x, "a_view": x[1], "b": b.to("openreg:1")}, buf)
    return buf, a, b


@pytest.mark.parametrize(
    "map_location, device_a, device_b",
    [
        ("openreg", "openreg:0", "openreg:0"),
        ("openreg:1", "openreg:1", "openreg:1"),
        ("openreg:0", "openreg:0", "openreg:0"),
        ("cpu", "cpu", "cpu"),
        (torch.device("openreg", 1), "openreg:1", "openreg:1"),
        (torch.device("cpu"), "cpu", "cpu"),
        ({"openreg:0": "openreg:1"}, "openreg:1", "openreg:1"),
        ({"openreg:1": "cpu"}, "openreg:0", "cpu"),
        ({"openreg:0": "openreg:1", "openreg:1": "openreg:0"}, "openreg:1", "openreg:0"),
        (lambda storage, location: storage.openreg(1), "openreg:1", "openreg:1"),
        (lambda storage, location: storage.to(device="openreg:1"), "openreg:1", "openreg:1"),
        (lambda storage, location: storage, "cpu", "cpu"),  # storages are read to the CPU first
        (lambda storage, location: None, "openreg:0", "openreg:1"),  # None: the default placement
    ],
    ids=[
        "openreg",
        "openreg:1",
        "openreg:0",
        "cpu",
        "device(openreg,1)",
        "device(cpu)",
        "dict0to1",
        "dict1tocpu",
        "dict_swap",
        "callable_openreg",
        "callable_to",
        "callable_identity",
        "callable_none",
    ],
)
def test_map_location(map_location, device_a, device_b):
    buf, a, b = _saved_on_both_devices()
    for weights_only in (False, True):
        buf.seek(0)
        loaded = torch.load(buf, map_location=map_location, weights_only=weights_only)
        assert loaded["a"].device == torch.device(device_a)
        assert loaded["a_view"].device == torch.device(device_a)
        assert loaded["b"].device == torch.device(device_b)
        assert loaded["a"].untyped_storage().data_ptr() == loaded["a_view"].untyped_storage().data_ptr()
        assert_same(loaded["a"], a, device_type=torch.device(device_a).type)
        assert_same(loaded["a_view"], a[1], device_type=torch.device(device_a).type)
        assert_same(loaded["b"], b, device_type=torch.device(device_b).type)


def test_map_location_openreg_means_current_device(restore_device):
    buf, a, _ = _saved_on_both_devices()
    torch.openreg.set_device(1)
    buf.seek(0)
    loaded = torch.load(buf, map_location="openreg")
    assert loaded["a"].device == torch.device("openreg:1")
    assert loaded["b"].device == torch.device("openreg:1")
    assert_same(loaded["a"], a)


def test_map_location_to_missing_device_fails():
    buf, _, _ = _saved_on_both_devices()
    buf.seek(0)
    with pytest.raises(RuntimeError, match="device 5 but torch.openreg.device_count\\(\\) is 2"):
        torch.load(buf, map_location="openreg:5")


def test_cpu_checkpoint_to_openreg_and_back(round_trip):
    cpu = {
        "w": make_cpu((8, 3), seed=10),
        "i": make_cpu(4, dtype=torch.int16, seed=11),
        "c": make_cpu(3, dtype=torch.complex128, seed=12),
    }
    on_device = round_trip(cpu, map_location="openreg")
    for key, value in cpu.items():
        assert on_device[key].device == torch.device("openreg:0")
        assert_same(on_device[key], value)
    on_device1 = round_trip(cpu, map_location="openreg:1", weights_only=True)
    for key, value in cpu.items():
        assert on_device1[key].device == torch.device("openreg:1")
        assert_same(on_device1[key], value)
    back = round_trip(on_device, map_location="cpu")
    for key, value in cpu.items():
        assert back[key].device == torch.device("cpu")
        assert torch.equal(back[key], value)


# --------------------------------------------------------------------------
# modules and optimizers
# --------------------------------------------------------------------------


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
    )


def test_module_state_dict(round_trip):
    cpu_model = _model()
    model = _model().to(DEVICE)
    data = make_cpu((10, 6), seed=13)
    # one training-mode pass updates the batch-norm buffers on both
    model(data.to(DEVICE))
    cpu_model(data)
    state = model.state_dict()
    loaded = round_trip(state, weights_only=True)
    assert list(loaded) == list(state)
    for key, value in cpu_model.state_dict().items():
        assert loaded[key].device == torch.device("openreg:0"), key
        assert_same(loaded[key], value)
    fresh = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
    ).to("openreg:1")
    fresh.load_state_dict(round_trip(state, map_location="openreg:1"))
    assert all(p.device == torch.device("openreg:1") for p in fresh.state_dict().values())
    fresh.eval()
    cpu_model.eval()
    with torch.no_grad():
        assert_same(fresh(data.to("openreg:1")), cpu_model(data))


def _train(model, opt, device, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 6, generator=g).to(device)
        y = torch.randn(8, 3, generator=g).to(device)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


@pytest.mark.slow
def test_optimizer_state_dict(round_trip):
    cpu_model = _model()
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), lr=0.01, foreach=False)
    model = _model().to(DEVICE)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)
    _train(cpu_model, cpu_opt, "cpu", 3, seed=1)
    _train(model, opt, DEVICE, 3, seed=1)
    checkpoint = round_trip({"model": model.state_dict(), "opt": opt.state_dict()}, weights_only=True)
    for index, state in checkpoint["opt"]["state"].items():
        cpu_state = cpu_opt.state_dict()["state"][index]
        assert_same(state["exp_avg"], cpu_state["exp_avg"])
        assert_same(state["exp_avg_sq"], cpu_state["exp_avg_sq"])
        assert float(state["step"]) == float(cpu_state["step"]) == 3.0
    # resume on device 1 from the checkpoint and keep training: same numbers as the CPU run
    resumed = _model().to("openreg:1")
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=0.01, foreach=False)
    checkpoint1 = round_trip({"model": model.state_dict(), "opt": opt.state_dict()}, map_location="openreg:1")
    resumed.load_state_dict(checkpoint1["model"])
    resumed_opt.load_state_dict(checkpoint1["opt"])
    for state in resumed_opt.state.values():
        assert state["exp_avg"].device == torch.device("openreg:1")
    _train(cpu_model, cpu_opt, "cpu", 2, seed=2)
    _train(resumed, resumed_opt, "openreg:1", 2, seed=2)
    for p, q in zip(resumed.parameters(), cpu_model.parameters()):
        assert_same(p.detach(), q.detach())


def test_whole_module_pickle():
    cpu_model = _model().eval()
    model = _model().to(DEVICE).eval()
    loaded = _round_trip(model, weights_only=False)
    data = make_cpu((4, 6), seed=14)
    with torch.no_grad():
        assert_same(loaded(data.to(DEVICE)), cpu_model(data))
    assert next(loaded.parameters()).device == torch.device("openreg:0")


def test_requires_grad_and_parameters_survive():
    p = torch.nn.Parameter(make_cpu(5, seed=15).to(DEVICE))
    t = make_cpu(3, seed=16).to(DEVICE).requires_grad_()
    loaded = _round_trip({"p": p, "t": t})
    assert isinstance(loaded["p"], torch.nn.Parameter)
    assert loaded["p"].requires_grad and loaded["t"].requires_grad
    assert_same(loaded["p"].detach(), make_cpu(5, seed=15))


# --------------------------------------------------------------------------
# backend metadata
# --------------------------------------------------------------------------


def test_backend_metadata_round_trips_through_pytorchs_interface():
    """torch._utils.set_tensor_metadata / get_tensor_metadata reach openreg's
    BackendMeta: the backend's entries are kept beside PyTorch's own bits
    (neg), and a later call adds or replaces entries. They belong to the
    tensor (its TensorImpl): detach() and a Parameter, shallow copies of it,
    carry them; a view or a clone is a tensor of its own and starts without."""
    t = make_cpu(6).to(DEVICE)
    assert torch._utils.get_tensor_metadata(t) == {}
    torch._utils.set_tensor_metadata(t, {"format_number": True, "version_number": True})
    assert torch._utils.get_tensor_metadata(t) == {"format_number": True, "version_number": True}
    torch._utils.set_tensor_metadata(t, {"version_number": False, "packed": True})
    expected = {"format_number": True, "version_number": False, "packed": True}
    assert torch._utils.get_tensor_metadata(t) == expected
    assert torch._utils.get_tensor_metadata(t.detach()) == expected
    assert torch._utils.get_tensor_metadata(torch.nn.Parameter(t)) == expected
    assert torch._utils.get_tensor_metadata(t[1:]) == {}
    assert torch._utils.get_tensor_metadata(t.clone()) == {}
    # The detached tensor's entries are its own copy: changing them leaves the original's alone.
    detached = t.detach()
    torch._utils.set_tensor_metadata(detached, {"packed": False})
    assert torch._utils.get_tensor_metadata(t) == expected
    negative = t._neg_view()
    torch._utils.set_tensor_metadata(negative, {"format_number": True})
    assert torch._utils.get_tensor_metadata(negative) == {"format_number": True, "neg": True}
    # A CPU tensor has no backend metadata: PyTorch keeps only its own bits.
    cpu = torch.ones(2)
    torch._utils.set_tensor_metadata(cpu, {"format_number": True})
    assert torch._utils.get_tensor_metadata(cpu) == {}


def test_backend_metadata_is_pickled_but_not_deep_copied():
    """pickle keeps the entries (__reduce_ex__, as torch.save); copy.deepcopy, of a tensor or of a module, starts
    without them: torch's Tensor.__deepcopy__ copies the storage into a new tensor, for every backend."""
    t = make_cpu(6, seed=21).to(DEVICE)
    torch._utils.set_tensor_metadata(t, {"format_number": True})
    pickled = pickle.loads(pickle.dumps(t))
    assert torch._utils.get_tensor_metadata(pickled) == {"format_number": True}
    assert_same(pickled, make_cpu(6, seed=21))
    copied = copy.deepcopy(t)
    assert torch._utils.get_tensor_metadata(copied) == {}
    assert_same(copied, make_cpu(6, seed=21))
    module = torch.nn.Linear(2, 2, device=DEVICE)
    torch._utils.set_tensor_metadata(module.weight, {"packed": True})
    assert torch._utils.get_tensor_metadata(copy.deepcopy(module).weight) == {}


def test_backend_metadata_survives_save_load():
    """The entries are pickled with the tensor (torch.Tensor.__reduce_ex__
    asks get_tensor_metadata) and handed back to the rebuilt openreg tensor,
    with and without weights_only and onto another device; loading onto the
    CPU drops them without error."""
    marked = make_cpu(6, seed=17).to(DEVICE)
    other = make_cpu(4, seed=19).to("openreg:1")
    plain = make_cpu(6, seed=18).to(DEVICE)
    torch._utils.set_tensor_metadata(marked, {"format_number": True, "version_number": False})
    torch._utils.set_tensor_metadata(other, {"packed": True})
    for kwargs in ({}, {"weights_only": True}, {"map_location": "openreg:1"}):
        loaded = _round_trip({"marked": marked, "other": other, "plain": plain}, **kwargs)
        assert torch._utils.get_tensor_metadata(loaded["marked"]) == {"format_number": True, "version_number": False}
        assert torch._utils.get_tensor_metadata(loaded["other"]) == {"packed": True}, kwargs
        assert torch._utils.get_tensor_metadata(loaded["plain"]) == {}, kwargs
        assert_same(loaded["marked"], make_cpu(6, seed=17))
        assert_same(loaded["other"], make_cpu(4, seed=19))
    loaded = _round_trip({"marked": marked}, map_location="cpu")
    assert torch.equal(loaded["marked"], make_cpu(6, seed=17))
    assert torch._utils.get_tensor_metadata(loaded["marked"]) == {}


def test_backend_metadata_reaches_fake_tensors_and_compile_backends():
    """Fake tensors made from an openreg tensor carry its backend entries, so
    a graph compiler sees them on the inputs of the graph Dynamo traced."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    t = make_cpu((3, 3)).to(DEVICE)
    torch._utils.set_tensor_metadata(t, {"format_number": True})
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(t)
    assert isinstance(fake, FakeTensor) and fake.device == t.device
    assert torch._utils.get_tensor_metadata(fake) == {"format_number": True}
    assert torch._utils.get_tensor_metadata(mode.from_tensor(make_cpu(2).to(DEVICE))) == {}

    seen = []

    def backend(gm, example_inputs):
        placeholders = [node.meta["example_value"] for node in gm.graph.nodes if node.op == "placeholder"]
        seen.extend(torch._utils.get_tensor_metadata(x) for x in placeholders if isinstance(x, FakeTensor))
        return gm

    torch._dynamo.reset()
    assert_same(torch.compile(lambda x: x * 2, backend=backend)(t), make_cpu((3, 3)) * 2)
    assert seen == [{"format_number": True}]


def test_backend_metadata_reaches_fake_tensors_made_from_functionalized_tensors():
    """AOTAutograd fakeifies functionalized inputs; their wrapper has no
    BackendMeta of its own, the entries come from the tensor inside."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

    t = make_cpu((3, 3)).to(DEVICE)
    torch._utils.set_tensor_metadata(t, {"format_number": True, "version_number": False})
    with FunctionalTensorMode():
        wrapped = FunctionalTensor.to_functional(t)
        assert torch._utils.get_tensor_metadata(wrapped) == {}
        with FakeTensorMode() as mode:
            fake = mode.from_tensor(wrapped)
    assert torch._utils.get_tensor_metadata(fake) == {"format_number": True, "version_number": False}
    plain = torch._to_functional_tensor(t)  # the C++ wrapper alone, as functionalize() makes it
    with FakeTensorMode() as mode:
        assert torch._utils.get_tensor_metadata(mode.from_tensor(plain)) == {
            "format_number": True,
            "version_number": False,
        }
