"""The fused Triton induction (models/fused.py) against the torch loop, on Triton's CPU interpreter.

Trees are identical where the two engines take the same decisions: always up to rounding, so a test batch must
not hinge on an exact tie between two similarities that each engine rounds differently. Ties between leaf pairs
are safe (the kernel takes the torch loop's first similarities); what is not is e.g. [5] * 17 under entangled
structures, where the cosine of two identical parents (1 up to rounding) competes with the leaves' exact 1.0 -
the same caveat as between torch on CPU and on CUDA.

The kernel tests skip when triton is not installed (it comes with the `kernels` extra; CUDA builds of torch bring
their own). The interpreter is slow, so batches stay small; it checks the kernel's logic and numbering, not its
speed or its compiled numerics on a GPU.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from strae.models import fused
from strae.models.config import ModelConfig
from strae.models.model import StraeModel
from test_models_engine import VOCAB, padded, random_batch


@pytest.fixture(scope="module")
def interpreter():
    pytest.importorskip("triton")
    assert fused.interpreting()  # conftest.py sets TRITON_INTERPRET=1 before triton can be imported


def make_model(structure: str, functions: str, kernel: str, k: int = 3, u: int = 2) -> StraeModel:
    torch.manual_seed(11)
    cfg = ModelConfig(model="banyan", structure=structure, functions=functions, objective="ce", k=k, u=u,
                      vocab_size=VOCAB)
    model = StraeModel(cfg, induction_kernel=kernel)
    with torch.no_grad():  # larger than the papers' init so that the compositions' parameters matter
        model.embedding.weight.uniform_(-1, 1)
        for p in model.functions.parameters():
            p.uniform_(-1, 1)
    return model


def both_inductions(structure: str, functions: str, dropout: bool, sentences, k: int = 3, u: int = 2):
    reference = make_model(structure, functions, "torch", k, u).train(dropout)
    kernel = make_model(structure, functions, "triton", k, u).train(dropout)
    kernel.load_state_dict(reference.state_dict())
    ids, lengths = padded(sentences)
    torch.manual_seed(3)  # the step's dropout seed is one draw: the same for both
    _, expected = reference.induce(ids, lengths)
    torch.manual_seed(3)
    _, got = kernel.induce(ids, lengths)
    assert kernel.kernel_choice(ids.device).used == "triton"
    return expected, got


# Both structures: leaves are keyed by token (entangled) or by occurrence (sentential). (k, u) = (3, 2) and (2, 3)
# pad the (channels, channel size) tile in either dimension.
@pytest.mark.parametrize("dropout", [False, True], ids=["no_dropout", "dropout"])
@pytest.mark.parametrize("structure,functions,k,u", [("entangled", "diagonal", 3, 2), ("sentential", "diagonal", 2, 3),
                                                     ("sentential", "linear", 3, 2), ("entangled", "linear", 2, 3)])
def test_kernel_gives_the_torch_loops_trees(interpreter, structure, functions, k, u, dropout):
    # random lengths 1..13, exact ties (repeated pairs), a length-1 and a length-2 sentence, a duplicate
    sentences = random_batch(k * 10 + u)
    expected, got = both_inductions(structure, functions, dropout, sentences, k, u)
    for name in ("left", "right", "height", "roots", "span_start", "span_end"):
        assert torch.equal(getattr(expected, name), getattr(got, name)), name
    torch.testing.assert_close(got.up, expected.up, rtol=1e-5, atol=1e-5)
    if dropout:
        assert expected.keep is not None and torch.equal(expected.keep, got.keep)
        assert not expected.keep.all()  # the masks did drop something
        assert got.dropout.seed == expected.dropout.seed
    else:
        assert got.keep is None
    assert fused.compare(expected, got) is None


def test_kernel_on_single_leaf_sentences_and_a_wide_batch(interpreter):
    expected, got = both_inductions("sentential", "diagonal", True, [[1], [2], [3]])
    assert got.left.numel() == 0 and torch.equal(got.roots, torch.arange(3)) and fused.compare(expected, got) is None
    # 40 slots -> a 64-wide slot vector; the periodic sentence repeats pairs (exact ties between leaf pairs)
    wide = [[(7 * i) % VOCAB for i in range(40)], [(5 * i * i + 1) % VOCAB for i in range(17)], [1, 2]]
    expected, got = both_inductions("entangled", "diagonal", True, wide)
    assert fused.compare(expected, got) is None


def test_compare_reports_a_different_tree(interpreter):
    expected, got = both_inductions("sentential", "diagonal", False, [[1, 2, 3, 4]])
    got.left = got.left.flip(0)
    assert fused.compare(expected, got) == "left differs"


def test_kernel_choice_on_cpu_keeps_the_torch_loop(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    model = make_model("entangled", "diagonal", "auto")
    choice = model.kernel_choice(torch.device("cpu"))
    assert choice.used == "torch" and "cpu" in choice.reason
    assert choice.record() == {"requested": "auto", "used": "torch", "reason": choice.reason}
    assert make_model("entangled", "diagonal", "torch").kernel_choice(torch.device("cpu")).used == "torch"
    with pytest.raises(ValueError, match="induction_kernel triton: device cpu"):
        make_model("entangled", "diagonal", "triton").kernel_choice(torch.device("cpu"))
    with pytest.raises(ValueError, match="induction_kernel 'fast'"):
        make_model("entangled", "diagonal", "fast")


@pytest.mark.parametrize("model", ["banyan", "selfstrae"])
def test_first_use_check_passes_for_the_presets_and_a_failure_falls_back(interpreter, model, monkeypatch):
    functions = StraeModel(ModelConfig.preset(model, vocab_size=VOCAB)).functions  # k128 u2 / k16 u16
    assert fused.self_check(functions, torch.device("cpu")) is None
    # auto on CUDA runs the check first; here it fails (no CUDA in this torch) and the torch loop is kept
    choice = fused.choose_kernel("auto", torch.device("cuda"), functions)
    assert choice.used == "torch" and "first-use check" in choice.reason
    monkeypatch.setattr(fused, "induce_fused", lambda *args: (_ for _ in ()).throw(RuntimeError("no kernel")))
    assert fused.self_check(functions, torch.device("cpu")) == "RuntimeError: no kernel"


COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from strae.models.induce_kernel import induce_kernel

pointers = {"up_ptr": "*fp32", "adjacent_ptr": "*fp32", "leaf_key_ptr": "*i32", "keep_ptr": "*u8",
            "start_ptr": "*i64", "length_ptr": "*i32", "batch_ptr": "*i32", "step_base_ptr": "*i64",
            "left_ptr": "*i64", "right_ptr": "*i64", "height_ptr": "*i64", "span_start_ptr": "*i64",
            "span_end_ptr": "*i64", "root_ptr": "*i64", "w_left_ptr": "*fp32", "w_right_ptr": "*fp32",
            "bias_ptr": "*fp32", "n_leaves": "i32", "function_seed": "i32", "threshold": "i32", "scale": "fp32"}
# Banyan's functions, and Self-StrAE's linear ones at every k x u of SemEval Table 2
for linear, k, u in ((False, 128, 2),) + tuple((True, k, u) for k, u in ((8, 32), (16, 16), (32, 8), (64, 4), (128, 2),
                                                                          (256, 1))):
    constants = dict(K=k, U=u, E=k * u, HALVES=(k * u + 1) // 2, K_B=k, U_B=u, T_B=256, LINEAR=linear,
                     DROPOUT=True)
    signature = {name: pointers.get(name, "constexpr") for name in induce_kernel.arg_names}
    compiled = triton.compile(ASTSource(fn=induce_kernel, signature=signature, constexprs=constants),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": 1})
    assert "cubin" in compiled.asm, sorted(compiled.asm)
    # fp32 throughout, as the torch induction: no tt.dot (Triton would run it as TF32, see induce_kernel's LINEAR)
    assert "tt.dot" not in compiled.asm["ttir"], (linear, k, u)
    print("compiled", linear, k, u)
"""


def test_kernel_compiles_for_an_h100_without_one(interpreter, tmp_path):
    """The interpreter does not type-check like the compiler: compile the kernel to a cubin for sm_90 (no GPU
    needed; triton ships ptxas) in a process where Triton is not interpreting, at every linear k x u of SemEval
    Table 2; and none may hold a tt.dot (TF32 on NVIDIA: at k16 u16 the induction failed its first-use check on an
    H100 when the compiler made one, and the run fell back to the torch induction)."""
    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # not the user's ~/.triton
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # triton 3.9 warns when unset; 1 = the default of older releases
    result = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.count("compiled") == 7, result.stderr[-3000:]
