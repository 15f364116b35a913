"""`strae export RUN --format sentence-transformers OUT`: the folder loads in sentence-transformers without strae
and encodes exactly as `strae evaluate`; the MTEB wrapper gives the same vectors."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

# sentence-transformers is only imported in the subprocess (its import alone takes ~15 s on 2 shared cores)
if importlib.util.find_spec("sentence_transformers") is None:
    pytest.skip("sentence-transformers (the `export` extra) is not installed", allow_module_level=True)

from strae import export  # noqa: E402
from strae.encode import load_encoder  # noqa: E402
from test_train import train_tiny_run  # noqa: E402

SENTENCES = ["the cat sat on the mat", "a big dog ran over the green hill", "old man ate bread", "bird sang",
             "the cat sat", "Dog 42 RAN", "", "the green hill the green hill the green hill"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return train_tiny_run(tmp_path_factory.mktemp("export_run"), seed=3)


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("export_out") / "st_model"
    assert export.main([str(run_dir), "--format", "sentence-transformers", str(out)]) == 0
    return out


def test_folder_is_self_contained(exported, run_dir):
    names = {p.name for p in exported.iterdir()}
    assert {"model.pt", "tokenizer.model", "modules.json", "config_sentence_transformers.json", "strae_st.py",
            "strae_export.json", "strae_models_model.py", "strae_models_trees.py",
            "strae_models_induce_kernel.py"} <= names  # the Triton induction too, for CUDA
    for path in exported.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from strae\b|import strae\b)", text, re.M), f"{path.name} still imports strae"
    # a submodule imported from its package (`from strae.models import propagate_kernel as kernels`) is its own
    # copied file, imported relatively
    propagation = (exported / "strae_models_propagation.py").read_text(encoding="utf-8")
    assert "from . import strae_models_propagate_kernel as kernels" in propagation
    assert (exported / "strae_models_propagate_kernel.py").exists()
    record = json.loads((exported / "strae_export.json").read_text())
    assert record["run"]["seed"] == 3 and record["files"]["model.pt"]
    assert (exported / "model.pt").read_bytes() == (run_dir / "model.pt").read_bytes()


def test_sentence_transformers_loads_without_strae_and_matches_strae(exported, run_dir, tmp_path):
    """In a fresh interpreter where `import strae` fails (another machine), offline."""
    script = tmp_path / "load.py"
    script.write_text(
        "import sys, json, numpy as np\n"
        "sys.modules['strae'] = None  # any import of strae now raises ImportError\n"
        "sys.modules['triton'] = None  # the export loads without triton (only its CUDA induction uses it)\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"model = SentenceTransformer({str(exported)!r}, trust_remote_code=True, device='cpu')\n"
        f"texts = json.loads({json.dumps(json.dumps(SENTENCES))})\n"
        "vectors = model.encode(texts, batch_size=3, convert_to_numpy=True, show_progress_bar=False)\n"
        f"np.save({str(tmp_path / 'st.npy')!r}, vectors)\n"
        "print(model.get_sentence_embedding_dimension())\n"
        # saved again by sentence-transformers (as push_to_hub does) and loaded from there: the same vectors
        f"model.save({str(tmp_path / 'resaved')!r})\n"
        f"again = SentenceTransformer({str(tmp_path / 'resaved')!r}, trust_remote_code=True, device='cpu')\n"
        f"np.save({str(tmp_path / 'resaved.npy')!r}, again.encode(texts, batch_size=3, convert_to_numpy=True,"
        " show_progress_bar=False))\n"
        "del sys.modules['strae'], sys.modules['triton']\n"
        "from strae.export import MTEBEncoder\n"
        f"np.save({str(tmp_path / 'mteb.npy')!r}, MTEBEncoder({str(exported)!r}).encode(texts[:4]))\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "8"
    via_st = np.load(tmp_path / "st.npy")
    via_strae = load_encoder(str(run_dir)).encode_sentences(SENTENCES)
    assert via_st.shape == via_strae.shape == (len(SENTENCES), 8)
    empty = [i for i, s in enumerate(SENTENCES) if not s]
    assert np.isnan(via_st[empty]).all() and np.isnan(via_strae[empty]).all()
    keep = [i for i in range(len(SENTENCES)) if i not in empty]
    np.testing.assert_allclose(via_st[keep], via_strae[keep], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "resaved.npy"), via_st)
    # the MTEB wrapper over the exported folder (sentence-transformers inside) gives the same vectors
    np.testing.assert_allclose(np.load(tmp_path / "mteb.npy"), via_strae[:4], rtol=0, atol=1e-6)


def test_exported_engine_runs_the_triton_induction(exported, run_dir, tmp_path):
    """The export carries the fused Triton induction (on CUDA `auto` picks it): forced here on Triton's CPU
    interpreter, in a fresh interpreter without strae, it gives strae's vectors."""
    pytest.importorskip("triton")
    script = tmp_path / "kernel.py"
    script.write_text(
        "import sys, json, numpy as np, torch\n"
        "sys.modules['strae'] = None\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"st = SentenceTransformer({str(exported)!r}, trust_remote_code=True, device='cpu')\n"
        "engine = st[0].model\n"
        "engine.induction_kernel, engine._kernel_choices = 'triton', {}\n"
        f"texts = json.loads({json.dumps(json.dumps(SENTENCES))})\n"
        f"np.save({str(tmp_path / 'kernel.npy')!r}, st.encode(texts, batch_size=4, convert_to_numpy=True))\n"
        "print(engine.kernel_choice(torch.device('cpu')).used)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"),
               TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "triton"
    via_kernel, via_strae = np.load(tmp_path / "kernel.npy"), load_encoder(str(run_dir)).encode_sentences(SENTENCES)
    keep = [i for i, s in enumerate(SENTENCES) if s]
    np.testing.assert_allclose(via_kernel[keep], via_strae[keep], rtol=0, atol=1e-5)


def test_mteb_wrapper_protocol(run_dir):
    from_run = export.MTEBEncoder(run_dir)
    texts = SENTENCES[:4]
    a = from_run.encode(texts)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (4, 8)
    np.testing.assert_allclose(a, load_encoder(str(run_dir)).encode_sentences(texts), atol=1e-6)
    # MTEB 2.x hands batches with a `text` field; an empty text gives a zero row (MTEB cannot score NaN)
    batched = from_run.encode([{"text": texts[:2]}, {"text": texts[2:] + [""]}])
    np.testing.assert_allclose(batched[:4], a, atol=1e-6)
    assert (batched[4] == 0).all()
    sims = from_run.similarity_pairwise(a[:2], a[2:4])
    assert sims.shape == (2,) and np.all(np.abs(sims) <= 1 + 1e-9)


def test_export_refuses_bad_input(run_dir, exported, tmp_path):
    with pytest.raises(SystemExit, match="not empty"):
        export.export_sentence_transformers(run_dir, exported)
    with pytest.raises(SystemExit, match="encoder.json"):
        export.export_sentence_transformers(tmp_path, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_overwrite_replaces_only_an_earlier_export_and_only_once_the_new_one_is_complete(run_dir, tmp_path):
    """--overwrite never deletes what is not an export (another folder, the run itself or its parent), and a failed
    export leaves the earlier one as it was, with nothing partial beside it."""
    import shutil

    with pytest.raises(SystemExit, match="is, holds or lies inside the run directory"):
        export.export_sentence_transformers(run_dir, run_dir, overwrite=True)
    with pytest.raises(SystemExit, match="is, holds or lies inside the run directory"):
        export.export_sentence_transformers(run_dir, run_dir.parent, overwrite=True)
    with pytest.raises(SystemExit, match="is, holds or lies inside the run directory"):  # an export in the run
        export.export_sentence_transformers(run_dir, run_dir / "exported")
    assert not (run_dir / "exported").exists()
    assert (run_dir / "model.pt").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "precious.txt").write_text("keep")
    with pytest.raises(SystemExit, match="not a strae export"):
        export.export_sentence_transformers(run_dir, other, overwrite=True)
    assert (other / "precious.txt").read_text() == "keep"

    out = tmp_path / "st"
    export.export_sentence_transformers(run_dir, out)
    before = (out / "strae_export.json").read_bytes()
    broken = tmp_path / "broken_run"
    shutil.copytree(run_dir, broken)
    (broken / "model.pt").write_bytes(b"truncated")
    with pytest.raises(SystemExit, match="model.pt: cannot load"):
        export.export_sentence_transformers(broken, out, overwrite=True)
    assert (out / "strae_export.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken_run", "mine", "st"]
    export.export_sentence_transformers(run_dir, out, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken_run", "mine", "st"]
