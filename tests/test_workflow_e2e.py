"""End to end: add a synthetic language by editing ONE block of ONE config file and run the DAG to a table row.

Runs `snakemake --cores 2 results/scores.csv results/table2.md results/banyan/table5.md --configfile .test/config.yaml`
in a temporary copy of the working tree: corpus preparation, tokenizer training, tokenisation, one Self-StrAE and
one Banyan run (toy scale), evaluation on the block's inline eval sets (files in their published layouts: a
SemRel-2024 CSV, an STS-style TSV and a word-pair list; nothing added to config/registry.yaml or config/tasks.yaml),
aggregation and report tables: Banyan Table 5 gains the language's column with a reproduced number and "—" for the
paper, and SemEval Table 2 (English, never run here) reads "not run", never a number.
"""
from __future__ import annotations

import math
import re

import pandas as pd
import pytest
import yaml

from test_workflow import REPO, copy_workdir, snakemake

INLINE_SETS = {"synth_words": ("word_pairs", "word"), "synth_semrel": ("semrel2024", "sentence"),
               "synth_sts": ("sts_tsv", "sentence")}


def test_the_language_lives_in_one_block_only():
    """What the e2e run relies on: the overlay's block declares its eval files; the catalogue files don't know them."""
    block = yaml.safe_load((REPO / ".test/config.yaml").read_text(encoding="utf-8"))["languages"]["synth"]
    assert {name: (spec["format"], spec["level"]) for name, spec in block["eval_sets"].items()} == INLINE_SETS
    for catalogue in ("config/registry.yaml", "config/tasks.yaml"):
        assert "synth" not in (REPO / catalogue).read_text(encoding="utf-8")


@pytest.mark.slow
def test_synthetic_language_runs_to_a_table_row(tmp_path, monkeypatch):
    workdir = copy_workdir(tmp_path)
    targets = ("results/scores.csv", "results/table2.md", "results/banyan/table5.md",
               "--configfile", ".test/config.yaml")
    result = snakemake(workdir, "--cores", "2", *targets, timeout=600)
    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in (workdir / "logs").rglob("*.log")) \
        if (workdir / "logs").exists() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:] + logs
    scores = pd.read_csv(workdir / "results/scores.csv")
    synth = scores[(scores.language == "synth") & (scores.subset.isna())]
    assert set(synth.model) == {"selfstrae", "banyan"}
    assert set(synth.task) == set(INLINE_SETS)
    completed = synth[synth.status == "completed"]
    assert not completed.empty and all(math.isfinite(s) for s in completed.score)
    assert set(synth.n_pairs) == {200}  # every published-layout file read in full
    # an inline set is recorded like a catalogue task: file, checksum, format and where it came from
    evaluation = yaml.safe_load(open(
        workdir / "results/eval/synth/banyan/ce_diagonal_entangled_k128_u2/seed0.paper.json", encoding="utf-8"))
    semrel = evaluation["tasks"]["synth_semrel"]
    assert (semrel["origin"], semrel["format"], semrel["file"]) == \
        ("inline", "semrel2024", ".test/synth/sentences_semrel.csv")
    assert evaluation["provenance"]["data_files"][".test/synth/sentences_semrel.csv"] == semrel["sha256"]
    assert (workdir / "results/runs/synth/banyan/ce_diagonal_entangled_k128_u2/seed0/encoder.json").exists()
    table = pd.read_csv(workdir / "results/table2.csv")
    assert set(table.loc[table.column != "# Params", "status"]) == {"not run"}  # English never ran: no numbers
    table5 = pd.read_csv(workdir / "results/banyan/table5.csv")
    cell = table5[(table5.column == "Synthetic") & (table5.row == "Banyan")].iloc[0]
    assert cell.status == "ok" and math.isfinite(cell["mean"]) and math.isnan(cell.paper_mean)
    banyan_semrel = completed[(completed.model == "banyan") & (completed.task == "synth_semrel")].score.iloc[0]
    assert cell["mean"] == pytest.approx(banyan_semrel)
    lines = (workdir / "results/banyan/table5.md").read_text(encoding="utf-8").splitlines()
    header = next(line for line in lines if line.startswith("| row"))
    banyan = next(line for line in lines if line.startswith("| Banyan"))
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")],
                     [c.strip() for c in banyan.strip("|").split("|")]))
    assert "Synthetic" in cells and "paper —" in cells["Synthetic"] and "n=1" in cells["Synthetic"]

    # the workflow's tables (rendered from per-table scores) are what scores.csv renders: `strae record` takes them
    from strae.report import record
    monkeypatch.chdir(workdir)
    assert record.main(["--name", "e2e", "--no-readme"]) == 0
    manifest = yaml.safe_load((workdir / "reproductions/e2e/manifest.json").read_text(encoding="utf-8"))
    assert {"selfstrae/table2", "banyan/table5"} <= {entry["name"] for entry in manifest["tables"]}

    # Snakemake's params trigger, which the workflow relies on to retrain a run whose recipe changed (its command
    # names the recipe, not its values): nothing to do with the same config; one recipe value changed for Banyan
    # (an overlay, as a user would) reruns the Banyan run alone, and what reads it, never the Self-StrAE run
    same = snakemake(workdir, "-n", "--cores", "2", *targets, timeout=300)
    assert same.returncode == 0 and "Nothing to be done" in same.stdout + same.stderr, same.stdout[-3000:]
    (workdir / ".test/retuned.yaml").write_text("models: {banyan: {recipe: banyan, recipe_overrides: "
                                                 "{embedding_dropout: 0.2}}}\n", encoding="utf-8")
    retuned = snakemake(workdir, "-n", "--cores", "2", *targets, ".test/retuned.yaml", timeout=300)
    assert retuned.returncode == 0, retuned.stdout[-3000:] + retuned.stderr[-3000:]
    trained = set(re.findall(r"results/runs/synth/(\w+)/\w+/seed0/train\.json", retuned.stdout))
    assert trained == {"banyan"}, retuned.stdout[-3000:]
    assert "params have changed since last execution" in retuned.stdout

    # `snakemake --report` after the run: the report opens with the workflow description and contains the table
    report = snakemake(workdir, "--report", "report.html", "results/scores.csv", "results/table2.md",
                       "--configfile", ".test/config.yaml", timeout=300)
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    html = (workdir / "report.html").read_text(encoding="utf-8", errors="replace")
    assert "table2.md" in html and "table2.csv" in html and "Self-StrAE (SemEval 2024)" in html
