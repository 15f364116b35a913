"""strae figure / strae report param-counts: real files from real inputs, "not run" when runs are missing."""
from __future__ import annotations

import pandas as pd
import pytest
import yaml

from strae.report import figures, tables


def _scores(tmp_path):
    rows = []
    for k, u in [(8, 32), (128, 2)]:
        for seed in (0, 1):
            for task in ("simlex", "wordsim_sim", "wordsim_rel", "sts12", "sts16", "stsb", "semrel"):
                setting = f"ceco_linear_sentential_k{k}_u{u}"
                rows.append({"schema_version": 1, "language": "en", "model": "selfstrae", "setting": setting,
                             "seed": seed, "status": "completed", "failure_reason": "", "variant": "paper",
                             "task": task, "subset": "", "level": "word", "score": 10.0 + k / 10 + seed,
                             "n_pairs": 5, "n_oov": 0, "split": "test", "encoder_id": "x", "git_sha": "x",
                             "device": "cpu",
                             "source_json": f"results/eval/en/selfstrae/{setting}/seed{seed}.paper.json"})
    path = tmp_path / "scores.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("name", ["ku_curves", "banyan_fig1_ablations", "banyan_fig2_node_counts",
                                  "selfstrae_fig2_uniformity_alignment"])
def test_every_declared_figure_writes_png_and_pdf(repo_root, tmp_path, name):
    png, pdf = tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"
    argv = [name, "--tables", str(repo_root / "config/tables.yaml"), "--config", str(repo_root / "config/config.yaml"),
            "--paper-dir", str(repo_root / "paper_tables"), "--scores", str(_scores(tmp_path)),
            "--out-png", str(png), "--out-pdf", str(pdf)]
    assert figures.main(argv) == 0
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:4] == b"%PDF"


def test_unknown_figure_names_the_key(repo_root, tmp_path):
    with pytest.raises(SystemExit, match="no figure 'nope'"):
        figures.main(["nope", "--tables", str(repo_root / "config/tables.yaml"), "--out-png", "x.png",
                      "--out-pdf", "x.pdf"])


def test_param_counts_come_from_the_models(repo_root):
    config = yaml.safe_load((repo_root / "config/config.yaml").read_text())
    counts = tables.param_counts_frame(config).set_index(["model", "setting"])["non_embedding_parameters"]
    # the papers' counts: linear 4u^2+3u (SemEval Table 2), diagonal 7u (Banyan: 14 at u=2)
    assert counts[("selfstrae", "ceco_linear_sentential_k8_u32")] == 4192
    assert counts[("selfstrae", "ceco_linear_sentential_k128_u2")] == 22
    assert counts[("selfstrae", "ceco_linear_sentential_k256_u1")] == 7
    assert counts[("banyan", "ce_diagonal_entangled_k128_u2")] == 14
    assert counts[("selfstrae", "contrastive_linear_sentential_k16_u16")] == 1072
