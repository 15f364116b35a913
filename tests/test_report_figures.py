"""strae measure / strae figure: measurements from real models, figures drawn only from scores.csv and
measurement JSONs, "not run" when runs are missing."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from strae import paths
from strae.io import read_json, write_json
from strae.report import figures, measure, tables


@pytest.fixture(scope="module")
def tiny_tokenized(tmp_path_factory):
    """A tokenised corpus in the contract layout (strae.paths): 40 random sentences of 4-12 ids per split."""
    resources = tmp_path_factory.mktemp("resources")
    rng = np.random.default_rng(0)
    vocab = 50
    for split in paths.SPLITS:
        sentences = [rng.integers(0, vocab, size=int(rng.integers(4, 13))) for _ in range(40)]
        ids = np.concatenate(sentences).astype(np.int32)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])]).astype(np.int64)
        paths.tokenized_dir("xx", resources).mkdir(parents=True, exist_ok=True)
        np.save(paths.tokenized_file("xx", split, "ids.npy", resources), ids)
        np.save(paths.tokenized_file("xx", split, "offsets.npy", resources), offsets)
        write_json(paths.tokenized_file("xx", split, "json", resources),
                   {"vocab_size": vocab, "pad_id": vocab, "n_sentences": len(sentences), "n_tokens": len(ids)})
    return paths.tokenized_dir("xx", resources)


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


def _measure(repo_root, tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    argv = [name, "--tables", str(repo_root / "config/tables.yaml"), "--config", str(repo_root / "config/config.yaml"),
            "--device", "cpu", "--out", str(out), *extra]
    assert measure.main(argv) == 0
    return out


@pytest.mark.parametrize("name", ["ku_curves", "banyan_fig1_ablations", "banyan_fig2_node_counts",
                                  "selfstrae_fig2_uniformity_alignment"])
def test_every_declared_figure_writes_png_and_pdf(repo_root, tmp_path, name):
    png, pdf = tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"
    argv = [name, "--tables", str(repo_root / "config/tables.yaml"), "--config", str(repo_root / "config/config.yaml"),
            "--paper-dir", str(repo_root / "paper_tables"), "--scores", str(_scores(tmp_path)),
            "--out-png", str(png), "--out-pdf", str(pdf)]
    if name in measure.measurement_names(tables.load_tables(repo_root / "config/tables.yaml")):
        argv += ["--measurement", str(_measure(repo_root, tmp_path, name))]  # no runs, no corpus: "not run"
    assert figures.main(argv) == 0
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:4] == b"%PDF"


def test_ku_curves_plot_the_scores_means_over_k(repo_root, tmp_path, monkeypatch):
    """The k/u curves read scores.csv back: each column's line is its cells' mean over seeds at each k (the fixture's
    scores are 10 + k/10 + seed, seeds 0 and 1), the paper's means dashed beside it."""
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda fig, png, pdf: drawn.append(fig))
    assert figures.main(["ku_curves", "--tables", str(repo_root / "config/tables.yaml"),
                         "--config", str(repo_root / "config/config.yaml"), "--paper-dir",
                         str(repo_root / "paper_tables"), "--scores", str(_scores(tmp_path)),
                         "--out-png", str(tmp_path / "f.png"), "--out-pdf", str(tmp_path / "f.pdf")]) == 0
    lines = {container.get_label(): container.lines[0] for container in drawn[0].axes[0].containers}
    assert "STS-12" in lines and "SemRel (Dev)" in lines
    for line in lines.values():
        np.testing.assert_allclose(line.get_xdata(), [8, 128])
        np.testing.assert_allclose(line.get_ydata(), [10.5 + 0.8, 10.5 + 12.8])
    dashed = [line for line in drawn[0].axes[0].lines if line.get_linestyle() == "--"]
    assert len(dashed) == len(lines) and all(np.isfinite(line.get_ydata()).any() for line in dashed)


def test_a_model_figure_without_its_measurement_names_the_flag(repo_root, tmp_path):
    with pytest.raises(SystemExit, match="--measurement: figure 'banyan_fig2_node_counts'"):
        figures.main(["banyan_fig2_node_counts", "--tables", str(repo_root / "config/tables.yaml"),
                      "--config", str(repo_root / "config/config.yaml"),
                      "--out-png", str(tmp_path / "x.png"), "--out-pdf", str(tmp_path / "x.pdf")])


def test_unknown_figure_names_the_key(repo_root, tmp_path):
    with pytest.raises(SystemExit, match="no figure 'nope'"):
        figures.main(["nope", "--tables", str(repo_root / "config/tables.yaml"), "--out-png", "x.png",
                      "--out-pdf", "x.pdf"])
    with pytest.raises(SystemExit, match="nothing to measure for 'ku_curves'"):
        _measure(repo_root, tmp_path, "ku_curves")


def test_param_counts_come_from_the_models(repo_root, tmp_path):
    document = read_json(_measure(repo_root, tmp_path, measure.PARAM_COUNTS))
    assert document["measurement"] == "param_counts" and document["status"] == "ok"
    counts = measure.load_param_counts(tmp_path / "param_counts.json")
    # the papers' counts: linear 4u^2+3u (SemEval Table 2), diagonal 7u (Banyan: 14 at u=2)
    assert counts[("selfstrae", "ceco_linear_sentential_k8_u32")] == 4192
    assert counts[("selfstrae", "ceco_linear_sentential_k128_u2")] == 22
    assert counts[("selfstrae", "ceco_linear_sentential_k256_u1")] == 7
    assert counts[("banyan", "ce_diagonal_entangled_k128_u2")] == 14
    assert counts[("selfstrae", "contrastive_linear_sentential_k16_u16")] == 1072
    # the workflow's rerun trigger names exactly what the measurement counts
    from strae.data.registry import load_config

    config = load_config(repo_root / "config/config.yaml")
    assert measure.counted_settings(config) == sorted(f"{model}/{setting}" for model, setting in counts)
    with pytest.raises(SystemExit, match="not a parameter-count measurement"):
        measure.load_param_counts(_measure(repo_root, tmp_path, "banyan_fig2_node_counts"))


def test_node_counts_are_measured_on_the_corpus_and_plotted_from_the_json(repo_root, tmp_path, tiny_tokenized,
                                                                         monkeypatch):
    """With a tokenised corpus and no finished run, the untrained declared setting is measured; same seed, same
    numbers; the figure reads them back."""
    config = yaml.safe_load((repo_root / "config/config.yaml").read_text())
    config["report"]["node_count_batch_sizes"] = [2, 4]
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    name = "banyan_fig2_node_counts"

    def run(out):
        assert measure.main([name, "--tables", str(repo_root / "config/tables.yaml"), "--config", str(config_path),
                             "--corpus-dir", str(tiny_tokenized), "--device", "cpu", "--out", str(out)]) == 0
        return read_json(out)

    first, second = run(tmp_path / "a.json"), run(tmp_path / "b.json")
    assert first["status"] == "ok" and first["batch_sizes"] == [2, 4]
    assert first["source"].startswith("untrained ce_diagonal_entangled_k128_u2")
    assert first["nodes"] == second["nodes"]
    sentential, entangled = first["nodes"]["sentential"]["mean"], first["nodes"]["entangled"]["mean"]
    # sentential trees: 2n-1 nodes per sentence of n pieces; entangling identical subtrees can only merge nodes
    assert all(e <= s for s, e in zip(sentential, entangled)) and sentential[1] > sentential[0]
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    drawn = []
    save = figures._save
    monkeypatch.setattr(figures, "_save", lambda fig, png, pdf: (drawn.append(fig), save(fig, png, pdf)))
    assert figures.main([name, "--tables", str(repo_root / "config/tables.yaml"), "--config", str(config_path),
                         "--measurement", str(tmp_path / "a.json"), "--out-png", str(png), "--out-pdf", str(pdf)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    plotted = {container.get_label(): container.lines[0] for container in drawn[0].axes[0].containers}
    for kind in ("sentential", "entangled"):  # the measurement's numbers, read back
        line = plotted[f"{kind} trees"]  # (lists plot as object arrays)
        np.testing.assert_allclose(line.get_xdata().astype(float), [2, 4])
        np.testing.assert_allclose(line.get_ydata().astype(float), first["nodes"][kind]["mean"])


def _curve_json(path, model: str, seed: int, scores: list[tuple[float, float]]):
    """A training-curve JSON as `strae evaluate --suite senteval --curve` writes it (evaluations left out)."""
    from strae.evaluate import curve

    points = [{"step": 5 * i, "sentences_trained": 500 * i, "train_seconds": float(i), "final": i == len(scores) - 1,
               "scores": {"SICK-E": e, "SICK-R": r}, "evaluation": {}} for i, (e, r) in enumerate(scores)]
    write_json(path, {"schema_version": curve.SCHEMA_VERSION, "kind": curve.KIND, "suite": "senteval",
                      "language": "en", "tasks": ["SICK-E", "SICK-R"], "run": {"model": model, "seed": seed},
                      "points": points})
    return path


def test_training_curve_plots_each_model_over_its_seeds_beside_the_papers_value(repo_root, tmp_path, monkeypatch):
    """The multi-view paper's Fig. 2: a panel per task, a line per model (mean ± std over seeds at each point, x in
    thousands of sentences), the paper's Table 1 value dashed; without curves, each panel says so."""
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda fig, png, pdf: drawn.append(fig))
    curves = [_curve_json(tmp_path / "a.json", "multiview_ctl", 0, [(50.0, 40.0), (60.0, 50.0)]),
              _curve_json(tmp_path / "b.json", "multiview_ctl", 1, [(52.0, 44.0), (64.0, 50.0)]),
              _curve_json(tmp_path / "c.json", "multiview_cl", 0, [(55.0, 45.0), (58.0, 47.0)])]
    argv = ["multiview_fig2_training_curve", "--tables", str(repo_root / "config/tables.yaml"),
            "--config", str(repo_root / "config/config.yaml"), "--paper-dir", str(repo_root / "paper_tables"),
            "--out-png", str(tmp_path / "f.png"), "--out-pdf", str(tmp_path / "f.pdf")]
    failed = tmp_path / "failed.json"  # a failed seed's curve: no points, not counted
    write_json(failed, {**read_json(curves[0]), "points": [], "run": {"model": "multiview_ctl", "seed": 3}})
    assert figures.main(argv + ["--curves", *map(str, curves), str(failed)]) == 0
    top, bottom = drawn[0].axes
    assert top.get_title() == "SICK-E" and bottom.get_title() == "SICK-R"
    lines = {container.get_label(): container.lines[0] for container in top.containers}
    ctl = lines["Contrastive Tree LSTM (CTL) (n=2)"]
    np.testing.assert_allclose(ctl.get_xdata(), [0.0, 0.5])
    np.testing.assert_allclose(ctl.get_ydata(), [51.0, 62.0])
    legend = [text.get_text() for text in top.get_legend().get_texts()]
    assert "paper, Contrastive Tree (80)" in legend and "Contrastive LSTM (CL) (n=1)" in legend
    assert "paper, Contrastive Tree (76.8)" in [t.get_text() for t in bottom.get_legend().get_texts()]
    assert figures.main(argv) == 0  # no curve: the panels say so
    assert any("no curve given (--curves" in text.get_text() for text in drawn[-1].axes[0].texts)
    assert figures.main(argv + ["--curves", str(failed)]) == 0  # a failed seed's curve alone: said so
    assert any("every curve given is empty (failed runs)" in t.get_text() for t in drawn[-1].axes[0].texts)
    without = _curve_json(tmp_path / "e.json", "multiview_ctl", 0, [(52.0, 44.0)])
    document = read_json(without)
    for point in document["points"]:
        del point["scores"]["SICK-R"]
    write_json(without, {**document, "tasks": ["SICK-E"]})  # a curve scored on SICK-E alone: SICK-R's panel says so
    assert figures.main(argv + ["--curves", str(without)]) == 0
    assert any("SICK-R: no curve scored this task" in t.get_text() for t in drawn[-1].axes[1].texts)
    # seeds kept at different steps cannot be averaged
    odd = _curve_json(tmp_path / "d.json", "multiview_ctl", 2, [(50.0, 40.0), (60.0, 50.0), (61.0, 51.0)])
    with pytest.raises(SystemExit, match="multiview_ctl curves were kept at different steps"):
        figures.main(argv + ["--curves", str(curves[0]), str(odd)])
