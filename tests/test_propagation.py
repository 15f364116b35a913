"""models/propagation.py: the hand-derived passes compute the autograd engine's function — the same forward bit for
bit (same dropout masks, same summation order) and the same gradients to rounding — for both structures, both
decoder child orders, keyed (induction-dropout) and fresh masks, every objective; and a model trained with them
follows the autograd-trained one."""
from __future__ import annotations

import pytest
import torch

from strae.models.model import StraeModel
from strae.objectives import NAMES as OBJECTIVES
from strae.recipes import load as load_recipe
from tests.test_models_training import config, padded, tiny_corpus, trained_briefly

CASES = {  # structure, recipe, functions: banyan = keyed masks from the induction; strae_0_1 = fresh masks (no
    # induction dropout); selfstrae = the node_id decoder child order (sentential only)
    "entangled-keyed": ("entangled", "banyan", "diagonal"),
    "entangled-fresh": ("entangled", "strae_0_1", "diagonal"),
    "sentential-keyed": ("sentential", "banyan", "diagonal"),
    "sentential-node-id": ("sentential", "selfstrae", "diagonal"),
    "selfstrae": ("sentential", "selfstrae", "linear"),
    "entangled-linear-fresh": ("entangled", "strae_0_1", "linear"),
}
N_PARAMETERS = {"diagonal": 8, "linear": 5}  # the embedding + the functions' parameters


def _passes(propagation: str, structure: str, recipe: str, functions: str, dtype: torch.dtype, dropout: bool):
    torch.manual_seed(0)
    model = StraeModel(config("ce", structure, functions, k=8, u=3), load_recipe(recipe),
                       propagation=propagation).to(dtype).train()
    ids, lengths = padded(tiny_corpus(40, seed=2))
    torch.manual_seed(1)
    graph = model.graph(ids, lengths)
    up, down = model.propagate(graph, dropout=dropout)
    weights = torch.linspace(-1.0, 1.0, up.shape[1], dtype=dtype)
    # a loss touching every row of both outputs, nonlinear so each row's gradient differs
    ((up * weights).square().sum() + (down * weights.flip(0)).sin().sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return up.detach(), down.detach(), grads


@pytest.mark.parametrize("dropout", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_same_forward_bitwise_and_same_gradients(case, dropout):
    structure, recipe, functions = CASES[case]
    up, down, grads = _passes("autograd", structure, recipe, functions, torch.float64, dropout)
    up_h, down_h, grads_h = _passes("handwritten", structure, recipe, functions, torch.float64, dropout)
    assert torch.equal(up, up_h) and torch.equal(down, down_h)
    assert set(grads) == set(grads_h) and len(grads) == N_PARAMETERS[functions]
    for name in grads:
        torch.testing.assert_close(grads_h[name], grads[name], rtol=1e-12, atol=1e-12, msg=name)
    # float32: the forward still bitwise; the backward sums in another order (rounding only)
    up, down, grads = _passes("autograd", structure, recipe, functions, torch.float32, dropout)
    up_h, down_h, grads_h = _passes("handwritten", structure, recipe, functions, torch.float32, dropout)
    assert torch.equal(up, up_h) and torch.equal(down, down_h)
    for name in grads:  # relative to the largest entry: a parameter's entries differ in size by orders
        assert (grads_h[name] - grads[name]).abs().max() <= 1e-5 * grads[name].abs().max(), name


def test_dropout_really_differs_from_no_dropout():
    # guards the test above against masks that silently do nothing
    up, down, _ = _passes("handwritten", "entangled", "banyan", "diagonal", torch.float64, True)
    up_eval, down_eval, _ = _passes("handwritten", "entangled", "banyan", "diagonal", torch.float64, False)
    assert not torch.equal(up, up_eval) and not torch.equal(down, down_eval)


def _trained(objective: str, structure: str, functions: str, propagation: str):
    return trained_briefly(config(objective, structure, functions), 4, propagation=propagation)


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("structure,functions", [("entangled", "diagonal"), ("sentential", "diagonal"),
                                                 ("sentential", "linear")])
def test_training_follows_the_autograd_engine(objective, structure, functions):
    losses, weights = _trained(objective, structure, functions, "autograd")
    losses_h, weights_h = _trained(objective, structure, functions, "handwritten")
    assert losses[0] == losses_h[0]  # the first forward is the same function of the same weights and masks
    assert losses_h == pytest.approx(losses, rel=1e-5)
    for name in weights:
        torch.testing.assert_close(weights_h[name], weights[name], rtol=1e-4, atol=1e-5, msg=name)


def test_an_unknown_propagation_is_refused():
    with pytest.raises(ValueError, match="propagation 'tape' is not one of auto, autograd, handwritten"):
        StraeModel(config("ce", "entangled", "diagonal"), propagation="tape")


# ------------------------------------------------------------------------------------- the Triton level kernels
# conftest.py sets TRITON_INTERPRET=1: the kernels run on Triton's CPU interpreter (correctness, not speed).
try:  # the torch tests above run without triton; the kernels below need it (the `kernels` extra)
    import triton
except ImportError:
    triton = None
needs_triton = pytest.mark.skipif(triton is None, reason="triton is not installed (pip install -e .[kernels])")


def _levels(structure: str, recipe: str, functions: str, dropout: bool, triton_levels: bool, n_sentences: int = 40):
    from strae.models.propagation import propagate_handwritten

    torch.manual_seed(0)
    model = StraeModel(config("ce", structure, functions, k=8, u=3), load_recipe(recipe)).train()
    ids, lengths = padded(tiny_corpus(n_sentences, seed=2))
    torch.manual_seed(1)
    graph = model.graph(ids, lengths)
    up, down = propagate_handwritten(model, graph, dropout, triton_levels=triton_levels)
    weights = torch.linspace(-1.0, 1.0, up.shape[1])
    ((up * weights).square().sum() + (down * weights.flip(0)).sin().sum()).backward()
    return up.detach(), down.detach(), {name: p.grad.clone() for name, p in model.named_parameters()
                                        if p.grad is not None}


@needs_triton
@pytest.mark.parametrize("dropout", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_triton_levels_compute_the_torch_levels(case, dropout):
    structure, recipe, functions = CASES[case]
    up, down, grads = _levels(structure, recipe, functions, dropout, triton_levels=False)
    up_t, down_t, grads_t = _levels(structure, recipe, functions, dropout, triton_levels=True)
    torch.testing.assert_close(up_t, up, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(down_t, down, rtol=1e-6, atol=1e-7)
    assert set(grads) == set(grads_t)
    for name in grads:
        assert (grads_t[name] - grads[name]).abs().max() <= 1e-5 * grads[name].abs().max(), name


@needs_triton
def test_level_launches_put_the_narrow_top_levels_in_one_single_program_launch():
    from strae.models.propagation import level_launches

    offsets = [0, 100, 160, 190, 200, 205, 207, 208]  # widths 100, 60, 30, 10, 5, 2, 1
    assert level_launches(offsets, 16, 0) == [(level, level + 1, p) for level, p in
                                              zip(range(1, 7), (4, 2, 1, 1, 1, 1))]
    assert level_launches(offsets, 16, 10) == [(1, 2, 4), (2, 3, 2), (3, 7, 1)]
    assert level_launches(offsets, 16, 10, first=0)[:2] == [(0, 1, 7), (1, 2, 4)]
    assert level_launches(offsets, 16, 1) == level_launches(offsets, 16, 0)  # one narrow level: no gain, no tail
    assert level_launches(offsets, 16, 10 ** 9, first=0) == [(0, 1, 7), (1, 7, 1)]  # never the leaves
    assert level_launches([0, 5, 6], 16, 10 ** 9) == [(1, 2, 1)]


@needs_triton
@pytest.mark.parametrize("case, tails, n_sentences", [("entangled-keyed", (8, 10 ** 9), 40), ("selfstrae", (4,), 12)])
def test_levels_sharing_one_launch_compute_what_a_launch_per_level_does(case, tails, n_sentences, monkeypatch):
    """The same arithmetic in the same order, the blocks' partials in the same rows: identical results (the
    interpreter runs the single program's levels one after another, as the GPU's barrier orders them). Diagonal
    functions with a narrow-top tail and with every internal level in one launch; linear ones (slow on the
    interpreter) with the narrow top."""
    from strae.models import propagation

    structure, recipe, functions = CASES[case]
    monkeypatch.setattr(propagation, "LEVEL_TAIL_NODES", 0)  # a launch per level (the engine's default tails are not)
    monkeypatch.setattr(propagation, "LINEAR_LEVEL_TAIL_NODES", 0)
    separate = _levels(structure, recipe, functions, True, triton_levels=True, n_sentences=n_sentences)
    offsets = _graph_offsets(structure, recipe, functions, n_sentences)
    for tail in tails:
        monkeypatch.setattr(propagation, "LEVEL_TAIL_NODES", tail)
        monkeypatch.setattr(propagation, "LINEAR_LEVEL_TAIL_NODES", tail)
        assert any(end - first > 1 for first, end, _ in propagation.level_launches(offsets, 1, tail)), offsets
        shared = _levels(structure, recipe, functions, True, triton_levels=True, n_sentences=n_sentences)
        for a, b in zip(separate[:2], shared[:2]):
            assert torch.equal(a, b)
        assert set(separate[2]) == set(shared[2])
        assert all(torch.equal(separate[2][k], shared[2][k]) for k in shared[2]), tail


def _graph_offsets(structure: str, recipe: str, functions: str, n_sentences: int) -> list[int]:
    torch.manual_seed(0)
    model = StraeModel(config("ce", structure, functions, k=8, u=3), load_recipe(recipe)).train()
    ids, lengths = padded(tiny_corpus(n_sentences, seed=2))
    torch.manual_seed(1)
    return model.graph(ids, lengths).level_offsets


@needs_triton
def test_the_triton_levels_are_chosen_where_the_induction_runs_triton_and_recorded():
    cfg = config("ce", "entangled", "diagonal")
    model = StraeModel(cfg, induction_kernel="triton", propagation="handwritten")
    choice = model.levels_choice(torch.device("cpu"))  # the interpreter stands in for CUDA
    assert (choice.used, choice.reason) == ("triton", "the induction runs Triton; first-use check passed")
    assert StraeModel(cfg, propagation="handwritten").levels_choice(torch.device("cpu")).used == "torch"
    assert StraeModel(cfg, propagation="autograd").levels_choice(torch.device("cpu")).used == "autograd"
    # auto (the default): handwritten exactly where the induction runs Triton, autograd elsewhere (CPU runs as before)
    assert StraeModel(cfg).propagation_mode(torch.device("cpu")) == "autograd"
    assert StraeModel(cfg).levels_choice(torch.device("cpu")).used == "autograd"
    auto = StraeModel(cfg, induction_kernel="triton")
    assert (auto.propagation_mode(torch.device("cpu")), auto.levels_choice(torch.device("cpu")).used) == (
        "handwritten", "triton")
    linear = StraeModel(config("ce", "sentential", "linear"), induction_kernel="triton", propagation="handwritten")
    assert linear.levels_choice(torch.device("cpu")).used == "triton"
    # and a model trained two steps on them follows the torch levels
    results = [trained_briefly(cfg, 2, n_sentences=16, induction_kernel=kernel, propagation="handwritten")[1]
               for kernel in ("torch", "triton")]
    for name in results[0]:
        torch.testing.assert_close(results[1][name], results[0][name], rtol=1e-4, atol=1e-5, msg=name)


@needs_triton
def test_a_failing_triton_level_falls_back_to_the_torch_levels(monkeypatch):
    import strae.models.propagate_kernel as kernels

    class Broken:
        def __getitem__(self, grid):
            raise RuntimeError("no kernel image for this device")

    monkeypatch.setattr(kernels, "up_forward", Broken())
    model = StraeModel(config("ce", "entangled", "diagonal"), induction_kernel="triton", propagation="handwritten")
    choice = model.levels_choice(torch.device("cpu"))
    assert choice.used == "torch"
    assert "first-use check: RuntimeError: no kernel image for this device" in choice.reason


COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from strae.models import propagate_kernel

pointers = {  # every pointer argument's element type; the rest are i32 scalars or constexpr
    "children_ptr": "*i64", "begin_ptr": "*i64", "entries_ptr": "*i64", "left_ptr": "*i64", "right_ptr": "*i64",
    "root_ptr": "*i64", "offsets_ptr": "*i64"}
scalars = ("level_first", "level_end", "n_level0", "block_base", "block_end")
shapes = [("", dict(E=256, E_B=256, BLOCK=16))]  # diagonal: Banyan's E
shapes += [("_linear", dict(K=k, U=u, E=k * u, K_B=k, U_B=u, BLOCK=8))  # SemEval Table 2's k x u grid
           for k, u in ((8, 32), (16, 16), (32, 8), (64, 4), (128, 2), (256, 1))]
for suffix, shape in shapes:
    for name in ("up_forward", "down_forward", "down_backward", "up_backward"):
        kernel = getattr(propagate_kernel, name + suffix)
        constants = {key: value for key, value in dict(shape, MASKED=True, INTERNAL=True).items()
                     if key in kernel.arg_names}
        signature = {arg: ("constexpr" if arg in constants else "i32" if arg in scalars else
                           pointers.get(arg, "*fp32")) for arg in kernel.arg_names}
        compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constants),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        assert "cubin" in compiled.asm, (name, sorted(compiled.asm))
        # fp32 throughout, as the torch levels: no tt.dot (Triton would run it as TF32, see propagate_kernel._times)
        assert "tt.dot" not in compiled.asm["ttir"], (name + suffix, shape)
        # a launch of several levels reads rows it wrote itself (after a barrier): never through the read-only
        # non-coherent cache
        assert "ld.global.nc" not in compiled.asm["ptx"], (name + suffix, shape)
        print(name + suffix, shape.get("U", ""), "compiled")
"""


@needs_triton
def test_the_level_kernels_compile_for_an_h100_without_one(tmp_path):
    """As tests/test_fused_induction.py does for the induction: the interpreter does not type-check like the
    compiler, so compile each level kernel to an sm_90 cubin (triton ships ptxas) in a non-interpreting process:
    the diagonal ones at Banyan's E, the linear ones at every k x u of SemEval Table 2; and none may hold a tt.dot
    (TF32 on NVIDIA: the linear levels failed their first-use check on an H200 when the compiler made one)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    result = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.count("compiled") == 4 * 7, result.stderr[-3000:]


@needs_triton
def test_every_index_array_starts_16_byte_aligned():
    """Triton specialises a kernel on each pointer argument's 16-byte alignment: the plan's index arrays, slices of
    one buffer, must all start aligned whatever the batch, or a run compiles new kernel variants batch after batch."""
    from strae.models.propagation import LevelPlan

    model = StraeModel(config("ce", "entangled", "diagonal", k=8, u=3), load_recipe("banyan"))
    misaligned = set()
    for seed in range(4):  # batches of different sizes: the arrays' lengths (odd or even) differ between them
        ids, lengths = padded(tiny_corpus(13 + seed, seed=seed))
        plan = LevelPlan(model.graph(ids, lengths), torch.float32, triton_levels=True)
        arrays = {name: value for name, value in vars(plan).items() if isinstance(value, torch.Tensor)
                  and value.dtype == torch.int64}
        assert {"up_children", "roots", "up_begin", "up_entries", "down_left", "down_right"} <= set(arrays)
        misaligned |= {name for name, value in arrays.items() if value.data_ptr() % 16}
    assert not misaligned


@needs_triton
def test_parents_csr_is_the_lexsort_order():
    """_parents_csr sorts one combined key; it must give the documented lexsort order (child, parent level
    descending, left side first, parent) that the Triton levels sum messages in."""
    import numpy as np

    from strae.models.propagation import _parents_csr

    def level_offsets(level):  # the graph's level offsets for a sorted per-node level array (empty levels allowed)
        return np.concatenate(([0], np.cumsum(np.bincount(level)))).tolist()

    rng = np.random.default_rng(0)
    for n_level0, m, n_levels in ((50, 40, 7), (3, 1, 2), (200, 180, 30), (9000, 8500, 30)):
        n_nodes = n_level0 + m
        level = np.concatenate((np.zeros(n_level0, dtype=np.int64), np.sort(rng.integers(1, n_levels, m))))
        left, right = rng.integers(0, n_nodes, m), rng.integers(0, n_nodes, m)  # (entangled: shared children)
        begin, entries = _parents_csr(left, right, level_offsets(level), n_level0, n_nodes)
        child = np.concatenate((left, right))
        parent = n_level0 + np.concatenate((np.arange(m), np.arange(m)))
        side = np.repeat(np.array([0, 1]), m)
        expected = (2 * parent + side)[np.lexsort((parent, side, -level[parent], child))]
        assert np.array_equal(entries, expected)
        assert np.array_equal(np.diff(begin), np.bincount(child, minlength=n_nodes))
    # sentential trees (each node at most one parent: the sort-free path), a node's children in either order, and
    # the leaves of a batch with the roots unparented
    for n_level0 in (1, 2, 7, 300, 9000):
        m = n_level0 - 1
        n_nodes = n_level0 + m
        children = rng.permutation(n_nodes - 1)  # every node but the last (a root) has one parent
        left, right = children[:m], children[m:]
        level = np.concatenate((np.zeros(n_level0, dtype=np.int64), np.sort(rng.integers(1, 30, m))))
        begin, entries = _parents_csr(left, right, level_offsets(level), n_level0, n_nodes)
        child = np.concatenate((left, right))
        parent = n_level0 + np.concatenate((np.arange(m), np.arange(m)))
        side = np.repeat(np.array([0, 1]), m)
        assert np.array_equal(entries, (2 * parent + side)[np.lexsort((parent, side, -level[parent], child))])
        assert np.array_equal(np.diff(begin), np.bincount(child, minlength=n_nodes))


@needs_triton
def test_the_levels_check_allows_rounding_that_cancelling_sums_amplify():
    """Self-StrAE k256 u1 (a SemEval Table 2 grid point): decompose_bias's gradient (~0.13) sums ~10^4 terms that
    cancel; against the result alone the Triton levels' correct fp32 rounding failed the check (interpreter:
    3.3e-5, bound 1.3e-5) and the run fell back to the torch levels. Against float64 it is within the torch levels'
    own rounding times LEVELS_CHECK_ROUNDING_FACTOR."""
    from strae.models import propagation

    cfg = config("ceco", "sentential", "linear", k=256, u=1, model="selfstrae", vocab_size=50)
    model = StraeModel(cfg, load_recipe("selfstrae"), induction_kernel="triton", propagation="handwritten")
    assert propagation.self_check(model, torch.device("cpu")) is None
    assert model.levels_choice(torch.device("cpu")).used == "triton"


@needs_triton
def test_the_levels_check_still_fails_a_kernel_off_by_a_tf32_sized_error(monkeypatch):
    from strae.models import propagation

    exact = propagation.propagate_handwritten

    def off(model, graph, dropout, triton_levels=False):
        up, down = exact(model, graph, dropout, triton_levels=triton_levels)
        return (up * (1 + 1e-3), down) if triton_levels else (up, down)  # ~TF32's relative error, on one pass

    monkeypatch.setattr(propagation, "propagate_handwritten", off)
    model = StraeModel(config("ce", "entangled", "diagonal"), induction_kernel="triton", propagation="handwritten")
    problem = propagation.self_check(model, torch.device("cpu"))
    assert problem is not None and problem.startswith("up differs from float64 by up to"), problem
