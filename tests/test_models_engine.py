"""The batched engine against the naive per-sentence reference, entangled invariants, parameter counts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_strae as ref
from strae.models.config import ModelConfig
from strae.models.model import StraeModel

VOCAB = 12


def make_model(structure: str, functions: str, k: int = 3, u: int = 2, seed: int = 0, **extra) -> StraeModel:
    torch.manual_seed(seed)
    cfg = ModelConfig(model="banyan", structure=structure, functions=functions, objective="ce", k=k, u=u,
                      vocab_size=VOCAB, **extra)
    model = StraeModel(cfg).double().eval()
    # Larger init than the papers' 0.1 so the diagonal/linear parameters matter visibly in the comparisons.
    with torch.no_grad():
        model.embedding.weight.uniform_(-1, 1)
        for p in model.functions.parameters():
            p.uniform_(-1, 1)
    return model


def padded(sentences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sentences)
    ids = torch.full((len(sentences), width), VOCAB, dtype=torch.long)
    for b, s in enumerate(sentences):
        ids[b, :len(s)] = torch.tensor(s)
    return ids, torch.tensor([len(s) for s in sentences])


def random_batch(seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    sentences = [rng.integers(0, VOCAB, size=int(n)).tolist() for n in rng.integers(1, 14, size=9)]
    # Ties: repeated pairs give exactly equal similarities; plus a length-1, a length-2 and a duplicate sentence.
    return sentences + [[3, 4, 3, 4, 3, 4], [5, 5, 5, 5, 5], [7], [2, 9], sentences[0][:], [3, 4]]


def node_keys(graph) -> list:
    keys: list = []
    n0 = graph.level_offsets[1]
    tokens = graph.leaf_tokens.tolist()
    for node in range(graph.n_nodes):
        keys.append(tokens[node] if node < n0 else (keys[graph.left[node - n0]], keys[graph.right[node - n0]]))
    return keys


def node_spans(graph, lengths: list[int]) -> list:
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    n0 = graph.level_offsets[1]
    spans: list = []
    for node in range(graph.n_nodes):
        if node < n0:
            b = int(np.searchsorted(offsets, node, side="right") - 1)
            spans.append((b, (node - int(offsets[b]), node - int(offsets[b]))))
        else:
            (b, (start, _)), (_, (_, end)) = spans[graph.left[node - n0]], spans[graph.right[node - n0]]
            spans.append((b, (start, end)))
    return spans


@pytest.mark.parametrize("functions", ["linear", "diagonal"])
@pytest.mark.parametrize("structure", ["sentential", "entangled"])
@pytest.mark.parametrize("seed", [0, 1])
def test_engine_matches_reference(structure, functions, seed):
    model = make_model(structure, functions, seed=seed)
    sentences = random_batch(seed)
    ids, lengths = padded(sentences)
    graph = model.graph(ids, lengths)
    up, down = model.propagate(graph, dropout=False)
    with torch.no_grad():
        if structure == "sentential":
            roots, table = ref.sentential(sentences, model)
            keys = node_spans(graph, lengths.tolist())
            assert sorted(keys) == sorted(table), "engine trees differ from the reference's"
        else:
            roots, table = ref.entangled(sentences, model)
            keys = node_keys(graph)
            assert len(set(keys)) == len(keys) == len(table) and set(keys) == set(table)
            root_keys = [keys[r] for r in graph.roots.tolist()]
            assert root_keys == [root.key for root in roots]
        for node, key in enumerate(keys):
            ref_up, ref_down = table[key]
            torch.testing.assert_close(up[node], ref_up, rtol=1e-9, atol=1e-10)
            torch.testing.assert_close(down[node], ref_down, rtol=1e-9, atol=1e-10)
        encoded = model.encode(ids, lengths)
        torch.testing.assert_close(encoded, torch.stack([root.up for root in roots]), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("functions", ["linear", "diagonal"])
def test_entangled_invariants_and_identical_trees(functions):
    model = make_model("entangled", functions, seed=3)
    sentences = random_batch(3) + random_batch(4)
    ids, lengths = padded(sentences)
    entangled = model.graph(ids, lengths, structure="entangled")
    sentential = model.graph(ids, lengths, structure="sentential")
    pairs = list(zip(entangled.left.tolist(), entangled.right.tolist()))
    assert len(pairs) == len(set(pairs)), "duplicate (left, right) node in the entangled graph"
    assert entangled.n_nodes <= sentential.n_nodes
    assert entangled.n_nodes < sentential.n_nodes  # the batch repeats sentences, so something must merge
    assert sorted(entangled.leaf_tokens.tolist()) == sorted(set(ids[ids < VOCAB].tolist()))
    # Per-sentence trees identical under both structures.
    ent_keys, sent_keys = node_keys(entangled), node_keys(sentential)
    assert [ent_keys[r] for r in entangled.roots.tolist()] == [sent_keys[r] for r in sentential.roots.tolist()]
    counts = model.node_counts(ids, lengths)
    assert counts == {"sentential": sentential.n_nodes, "entangled": entangled.n_nodes}
    assert counts["sentential"] == int((2 * lengths - 1).sum())


def test_up_down_rows_match_and_single_piece_word_is_its_row():
    model = make_model("entangled", "diagonal", seed=5)
    ids, lengths = padded([[1, 2, 3], [4], [1, 2]])
    up, down = model.up_down(ids, lengths)
    assert up.shape == down.shape == (model.node_counts(ids, lengths)["entangled"], model.config.embedding_size)
    encoded = model.encode(ids, lengths)
    torch.testing.assert_close(encoded[1], model.embedding.weight[4])


def test_padding_content_is_ignored():
    model = make_model("sentential", "linear", seed=6)
    ids, lengths = padded([[1, 2, 3, 4], [5, 6]])
    wider = torch.cat((ids, torch.full((2, 3), VOCAB)), dim=1)
    torch.testing.assert_close(model.encode(ids, lengths), model.encode(wider, lengths))
    bad = ids.clone()
    bad[1, 1] = VOCAB  # pad inside a sentence's length
    with pytest.raises(ValueError, match="token ids must lie"):
        model.encode(bad, lengths)


@pytest.mark.parametrize("functions,u,k,expected", [("diagonal", 2, 128, 14), ("linear", 2, 128, 22),
                                                    ("linear", 1, 256, 7), ("linear", 16, 16, 1072),
                                                    ("linear", 32, 8, 4192)])
def test_non_embedding_parameter_counts(functions, u, k, expected):
    cfg = ModelConfig(structure="sentential", functions=functions, k=k, u=u, vocab_size=50)
    assert StraeModel(cfg).non_embedding_parameter_count() == expected


def test_config_roundtrip_presets_and_errors():
    cfg = ModelConfig.preset("selfstrae", vocab_size=100, k=None)
    assert (cfg.structure, cfg.functions, cfg.objective, cfg.k, cfg.u) == ("sentential", "linear", "ceco", 16, 16)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    banyan = ModelConfig.preset("banyan", vocab_size=100)
    assert banyan.setting_name() == "ce_diagonal_entangled_k128_u2"
    # a config written before recipes existed still loads (its recipe keys are read by recipes.legacy)
    assert ModelConfig.from_dict({**banyan.to_dict(), "temperature": 0.2, "bf16_vocab_projection": True}) == banyan
    with pytest.raises(ValueError, match="objective"):
        ModelConfig.preset("banyan", objective="mse")
    with pytest.raises(ValueError, match="unknown key"):
        ModelConfig.from_dict({"modle": "banyan"})


def test_build_graph_set_operations_give_np_unique_exactly():
    """trees.py replaces np.unique / argsort on the host path of build_graph with faster forms; they must give the
    very same arrays (the node numbering decides summation order and mask order downstream)."""
    from strae.models.trees import _stable_order, _unique_small_ints, _unique_sorted

    rng = np.random.default_rng(0)
    cases = [rng.integers(0, n, size) for n, size in ((25000, 16000), (5, 40), (1, 3), (100, 1))]
    cases += [np.zeros(0, dtype=np.int64), np.array([7, 3, 7, 0, 3, 3]), rng.integers(0, 10**9, 300)]
    # from _PACKED_SORT_MIN keys a packed value sort: ties (many), keys as large as a level's (lc * n_occ + rc),
    # and keys too large to pack with their positions (the argsort again)
    cases += [rng.integers(0, 5, 3000), rng.integers(0, 20000**2, 8000), rng.integers(0, 2**62, 2000),
              rng.integers(0, 2**30, 2000).astype(np.int32)]  # packed in int64, not overflowing int32
    for values in cases:
        expected = np.unique(values, return_index=True, return_inverse=True)
        for function in (_unique_sorted,) + ((_unique_small_ints,) if values.max(initial=0) < 10**6 else ()):
            got = function(values)
            assert all(np.array_equal(e, g) for e, g in zip(expected, got, strict=True)), function.__name__
            assert got[0].dtype == expected[0].dtype, function.__name__
        assert np.array_equal(_stable_order(values), np.argsort(values, kind="stable"))
    heights = rng.integers(0, 40, 5000)
    assert np.array_equal(_stable_order(heights), np.argsort(heights, kind="stable"))
    big = np.array([70000, 3, 70000, 1])  # beyond int16: the plain sort
    assert np.array_equal(_stable_order(big), np.argsort(big, kind="stable"))


def test_a_host_batch_for_a_cuda_model_is_packed_on_the_host_and_sent_in_one_async_copy(monkeypatch):
    """strae train hands the model host tensors: pack_batch checks and packs them on the host (no read-back from
    the device) and sends the tokens once, pinned and non-blocking. The copy is intercepted here (no GPU)."""
    from strae.models.trees import pack_batch

    ids = torch.tensor([[3, 4, 5, 9], [6, 7, 9, 9]])
    lengths = torch.tensor([3, 2])
    copies = []
    to = torch.Tensor.to

    def fake_to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("device")
        if isinstance(target, torch.device) and target.type == "cuda":
            copies.append((target, kwargs.get("non_blocking"), self.is_pinned_marker))
            return self
        return to(self, *args, **kwargs)

    def fake_pin(self):
        self.is_pinned_marker = True
        return self

    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
    packed = pack_batch(ids, lengths, 9, device=torch.device("cuda"))
    assert copies == [(torch.device("cuda"), True, True)]
    expected = pack_batch(ids, lengths, 9)
    assert torch.equal(packed.tokens, expected.tokens) and packed.tokens.tolist() == [3, 4, 5, 6, 7]
    assert packed.lengths == [3, 2] and packed.offsets.tolist() == [0, 3, 5]
    with pytest.raises(ValueError, match="token ids must lie"):  # checked on the host, before any copy
        pack_batch(torch.tensor([[3, 12]]), torch.tensor([2]), 9, device=torch.device("cuda"))
    assert len(copies) == 1
    # build_graph reads the packing's host copy of the tokens, not the device's (no copy back)
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: pytest.fail("tokens copied back from the device"))
    assert packed.tokens_on_host().tolist() == [3, 4, 5, 6, 7]


def test_host_arrays_reach_a_cuda_device_through_pinned_memory_without_a_host_sync(monkeypatch):
    """host_to_device: on CPU the array itself (shared memory, no copy); for CUDA one pinned, non-blocking copy
    (a plain .to("cuda") from pageable memory synchronises the stream). The copy is intercepted here (no GPU)."""
    import numpy as np

    from strae.runtime import host_to_device

    array = np.arange(6, dtype=np.int64)[::2]  # not contiguous: made so before it becomes a tensor
    on_cpu = host_to_device(array, torch.device("cpu"))
    assert on_cpu.tolist() == [0, 2, 4] and on_cpu.dtype == torch.int64
    shared = np.arange(3, dtype=np.int32)
    assert host_to_device(shared, torch.device("cpu")).data_ptr() == shared.ctypes.data  # no copy on CPU
    calls = []
    to = torch.Tensor.to

    def fake_pin(self):
        calls.append("pin")
        return self.clone()

    def fake_to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("device")
        if isinstance(target, torch.device) and target.type == "cuda":
            calls.append(("to", target.type, kwargs.get("non_blocking")))
            return self
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    moved = host_to_device(array, torch.device("cuda"))
    assert calls == ["pin", ("to", "cuda", True)] and moved.tolist() == [0, 2, 4]


def test_several_host_arrays_reach_a_cuda_device_in_one_copy_each_aligned(monkeypatch):
    """host_to_device_many: the arrays' bytes packed into one buffer (every array on a 16-byte boundary, since Triton
    specialises kernels on pointer alignment), one non-blocking copy, and views read back with their dtypes and
    shapes; on CPU the arrays themselves. The CUDA copy is intercepted here (no GPU)."""
    import numpy as np

    from strae import runtime

    arrays = [np.arange(5, dtype=np.int64)[::2], np.array([3, -1, 7], dtype=np.int32), np.zeros(0, dtype=np.int64),
              np.array([True, False, True]), np.linspace(0, 1, 7), np.arange(6, dtype=np.int32).reshape(2, 3),
              torch.tensor(4.5)]
    on_cpu = runtime.host_to_device_many(arrays, torch.device("cpu"))
    shared = arrays[1]
    assert on_cpu[1].data_ptr() == shared.ctypes.data  # no copy on CPU
    as_tensors = [a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    buffer, layout = runtime.pack_bytes(as_tensors)
    assert all(offset % runtime.PACK_ALIGNMENT == 0 for offset, *_ in layout)
    unpacked = runtime.unpack_bytes(buffer, layout)
    for expected, cpu, view in zip(as_tensors, on_cpu, unpacked):
        for got in (cpu, view):
            assert got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected)
        assert view.data_ptr() % runtime.PACK_ALIGNMENT == 0 or view.numel() == 0
    calls = []
    to, pack = torch.Tensor.to, runtime.pack_bytes

    def fake_to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("device")
        if isinstance(target, torch.device) and target.type == "cuda":
            calls.append(("to", kwargs.get("non_blocking"), self.dtype))
            return self
        return to(self, *args, **kwargs)

    def unpinned_pack(tensors, pin=False):  # pinning needs a CUDA build; record that it was asked for
        calls.append(("pin", pin))
        return pack(tensors)

    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    monkeypatch.setattr(runtime, "pack_bytes", unpinned_pack)
    moved = runtime.host_to_device_many(arrays, torch.device("cuda"))
    assert calls == [("pin", True), ("to", True, torch.uint8)]
    assert [m.tolist() for m in moved] == [v.tolist() for v in unpacked]


def test_the_engine_sends_no_host_array_with_a_blocking_copy():
    """Inside the engine's step (models, objectives) host arrays go through runtime.host_to_device: a plain
    ``.to(cuda)`` of host memory, ``torch.tensor(..., device=)`` or ``torch.as_tensor(..., device=)`` is a copy
    followed by a stream synchronise, the host waiting for every queued kernel (docs/GPU.md)."""
    import re
    from pathlib import Path

    import strae.models
    import strae.objectives

    blocking = re.compile(r"from_numpy\(.*\)\.to\(|as_tensor\(.*device=|torch\.tensor\(.*device=")
    offenders = []
    for package in (strae.models, strae.objectives):
        for path in sorted(Path(package.__file__).parent.glob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if blocking.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, offenders


@pytest.mark.parametrize("functions", ["linear", "diagonal"])
def test_function_gains_are_the_spectral_norms_of_the_per_channel_maps(functions):
    """train.json's function_gains: the largest singular value of the dense (u, 2u) composition and (2u, u)
    decomposition maps one channel applies (biases aside), read off each function's own forward pass."""
    from strae.models.functions import make_functions

    torch.manual_seed(0)
    k, u = 3, 5
    module = make_functions(functions, k, u).double()
    for parameter in module.parameters():  # move away from the initialisation: trained gates and weights
        parameter.data.add_(torch.randn_like(parameter))
    module.requires_grad_(False)
    eye = torch.eye(2 * u, dtype=torch.float64)
    # channel 0's map, column by column: unit children in, compose's output minus its bias out
    children = torch.zeros(2 * u, 2, k * u, dtype=torch.float64)
    children[:, 0, :u], children[:, 1, :u] = eye[:, :u], eye[:, u:]
    bias = module.compose(torch.zeros(1, 2, k * u, dtype=torch.float64))[0, :u]
    compose_map = (module.compose(children)[:, :u] - bias).T  # (u, 2u)
    parents = torch.zeros(u, k * u, dtype=torch.float64)
    parents[:, :u] = eye[:u, :u]
    zero = module.decompose(torch.zeros(1, k * u, dtype=torch.float64))[0, :, :u]
    decompose_map = (module.decompose(parents)[:, :, :u] - zero).reshape(u, 2 * u).T  # (2u, u)
    gains = module.gains()
    assert gains["compose"] == pytest.approx(float(torch.linalg.svdvals(compose_map)[0]), rel=1e-9)
    assert gains["decompose"] == pytest.approx(float(torch.linalg.svdvals(decompose_map)[0]), rel=1e-9)
    if functions == "diagonal":
        assert max(gains.values()) < 2 ** 0.5
