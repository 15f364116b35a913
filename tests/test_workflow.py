"""The Snakemake DAG: dry-runs of every target, lint, config validation messages, the run plan.

Snakemake runs in a temporary copy of the working tree (config, workflow, paper tables; no resources/results),
so tests never touch the repository's results/ or .snakemake/.
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from strae import paths, plan

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
COPIED = ["Snakefile", "workflow", "config", "paper_tables", "profiles", ".test"]


def copy_workdir(dest: Path) -> Path:
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy2(source, dest / name)
    return dest


def snakemake(workdir: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([str(SNAKEMAKE), *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return copy_workdir(tmp_path_factory.mktemp("workflow"))


def paper_config() -> dict:
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


def test_dry_run_paper_table2_trains_only_its_ceco_grid(workdir):
    result = snakemake(workdir, "-n", "--cores", "8", "results/table2.csv")
    assert result.returncode == 0, result.stderr + result.stdout
    runs = set(re.findall(r"results/runs/(\w+)/(\w+)/(\w+)/seed(\d+)/train\.json", result.stdout))
    expected = {("en", "selfstrae", f"ceco_linear_sentential_k{k}_u{u}", str(seed))
                for k, u in [(8, 32), (32, 8), (64, 4), (128, 2), (256, 1)] for seed in range(4)}
    # the table's own rows' runs (5 k/u settings x 4 seeds), nothing of another table or language
    assert runs == expected
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M))
    assert counts["train"] == "20" and counts["evaluate"] == "20" and counts["tokenizer"] == "1"
    # the table's own scores file, not results/scores.csv of every run
    assert counts["aggregate_table"] == "1" and "aggregate" not in counts
    assert "results/scores/selfstrae_table2.csv" in result.stdout


def test_dry_run_every_target(workdir):
    tables = yaml.safe_load((REPO / "config/tables.yaml").read_text())
    targets = ["all", "tables", "figures", "fetch_all", "results/scores.csv", "results/measure/param_counts.json"]
    for name in tables["tables"]:
        paper, number = name.split("_table")
        targets.append(f"results/table{number}.md" if paper == "selfstrae" else f"results/banyan/table{number}.md")
    # the multi-view paper's figures are drawn beside its tables (multiview_figure), the others by `figure`
    from strae import paths, plan

    targets += [str(paths.multiview_figure_file(name, "pdf") if spec["kind"] in plan.MULTIVIEW_FIGURE_KINDS
                    else paths.figure_file(name, "pdf")) for name, spec in tables["figures"].items()]
    result = snakemake(workdir, "-n", "-p", "--cores", "8", *targets)
    assert result.returncode == 0, result.stderr + result.stdout
    for rule in ("train", "evaluate", "aggregate", "table", "figure", "measure"):
        assert re.search(rf"^{rule}\s+\d+", result.stdout, re.M), f"no {rule} job in the dry-run"
    # one table rule for both papers' tables; figures read measurements, only `measure` loads models
    assert re.search(r"^table\s+13$", result.stdout, re.M)
    assert re.search(r"^aggregate_table\s+13$", result.stdout, re.M)  # each table its own scores file
    assert "--measurement results/measure/banyan_fig2_node_counts.json" in result.stdout
    assert "--param-counts results/measure/param_counts.json" in result.stdout


def test_quick_overlay_same_dag_shape_fewer_runs(workdir):
    result = snakemake(workdir, "-n", "--cores", "2", "results/table2.csv", "--configfile", "config/quick.yaml")
    assert result.returncode == 0, result.stderr + result.stdout
    counts = dict(re.findall(r"^(train|evaluate)\s+(\d+)", result.stdout, re.M))
    assert counts == {"train": "10", "evaluate": "10"}  # 5 k/u x 2 seeds
    assert set(re.findall(r"results/runs/(\w+)/", result.stdout)) == {"en"}
    # a table none of whose runs is enabled (quick.yaml turns its experiment off): no training, its cells "not run"
    other = snakemake(workdir, "-n", "--cores", "2", "results/table3.csv", "--configfile", "config/quick.yaml")
    assert other.returncode == 0, other.stderr + other.stdout
    assert not re.search(r"^(train|evaluate)\s", other.stdout, re.M)
    assert re.search(r"^aggregate_table\s+1$", other.stdout, re.M)


def test_baselines_enabled_add_their_rules(workdir, tmp_path):
    overlay = tmp_path / "baselines.yaml"
    overlay.write_text(yaml.safe_dump({"baselines": {name: {"enabled": True} for name in
                                                     ("glove", "roberta", "roberta_simcse")}}))
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "results/banyan/table3.csv", "--configfile", str(overlay))
    assert result.returncode == 0, result.stderr + result.stdout
    for rule in ("train_glove", "train_roberta", "train_simcse", "evaluate"):
        assert re.search(rf"^{rule}\s+\d+", result.stdout, re.M), rule
    # one evaluate rule: a plain evaluation and an evaluation option (`SETTING@OPTION`) of the same run
    assert "results/eval/en/glove/words_w10_d256@stopword_rm/seed0.paper.json" in result.stdout
    assert "results/eval/en/glove/words_w10_d256/seed0.paper.json" in result.stdout
    assert "--encoder-option stopwords=remove" in result.stdout
    # SimCSE reads STS-B dev while it trains: from the configured resources, placed by the evaluation fetch job
    simcse = re.search(r"strae train-simcse [^\n]*", result.stdout)
    assert simcse and "--resources-dir resources " in simcse.group(0), result.stdout
    moved = overlay.with_name("moved.yaml")
    moved.write_text(yaml.safe_dump({"data": {"resources_dir": "store/res"}}))
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "results/banyan/table3.csv", "--configfile", str(overlay),
                       str(moved))
    assert result.returncode == 0, result.stderr + result.stdout
    simcse = re.search(r"strae train-simcse [^\n]*", result.stdout)
    assert simcse and "--resources-dir store/res " in simcse.group(0), result.stdout


def test_old_functions_overlay_trains_banyans_own_channels(workdir):
    """config/banyan_old_functions_k128.yaml: Banyan Tables 7-8's other reading of k x u (Banyan's own k128 u2 with the
    old linear functions), one experiment beside the table's k16 u16, with the table's recipe."""
    target = "results/eval/en/banyan/ce_linear_entangled_k128_u2/seed0.paper.json"
    result = snakemake(workdir, "-n", "-p", "--cores", "1", target, "--configfile",
                       "config/banyan_old_functions_k128.yaml")
    assert result.returncode == 0, result.stderr + result.stdout
    train = re.search(r"strae train [^\n]*", result.stdout).group(0)
    assert "--recipe banyan --structure entangled --functions linear --objective ce --k 128 --u 2" in train, train
    assert "--out results/runs/en/banyan/ce_linear_entangled_k128_u2/seed0" in train
    overlay = yaml.safe_load((REPO / "config/banyan_old_functions_k128.yaml").read_text())["experiments"]
    table = paper_config()["experiments"]["banyan_old_functions"]
    assert {**overlay["banyan_old_functions_k128"], "grid": None} == {**table, "grid": None}  # only k x u differs
    assert overlay["banyan_old_functions_k128"]["grid"] == {**table["grid"], "ku": [[128, 2]]}


def test_resources_dir_is_honoured_by_every_rule(workdir, tmp_path):
    """A non-default data.resources_dir moves every placed/prepared file (corpora, tokenizers, tokenised corpora,
    parses, fetched wheels) and nothing is left under resources/."""
    overlay = tmp_path / "elsewhere.yaml"
    overlay.write_text(yaml.safe_dump({"data": {"resources_dir": "store/res"}}))
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "all", "--configfile", str(overlay))
    assert result.returncode == 0, result.stderr + result.stdout
    for placed in ("store/res/corpora/en/train.txt", "store/res/tokenizers/en.model",
                   "store/res/tokenized/en/train.ids.npy", "--data-dir store/res/tokenized/en",
                   "--corpus-dir store/res/tokenized/en", "store/res/parses/en/"):
        assert placed in result.stdout, placed
    assert not re.search(r"(?<![\w/])resources/", result.stdout), "a path still under resources/"


def test_table_row_naming_an_undeclared_run_is_a_config_error(workdir, tmp_path):
    tables = yaml.safe_load((REPO / "config/tables.yaml").read_text())
    tables["tables"]["selfstrae_table1"]["rows"][1]["setting"] = "ce_linear_sentential_k16_u61"
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump(tables))
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"report": {"tables": str(tmp_path / "tables.yaml")}}))
    result = snakemake(workdir, "-n", "--cores", "1", "results/table1.csv", "--configfile", str(overlay))
    assert result.returncode != 0
    assert "tables.selfstrae_table1.rows.1 (CE): run selfstrae/ce_linear_sentential_k16_u61" in result.stdout
    # a declared run whose experiment is disabled (config/quick.yaml) is a choice, not an error
    quick = snakemake(workdir, "-n", "--cores", "1", "results/table1.csv", "--configfile", "config/quick.yaml")
    assert quick.returncode == 0, quick.stderr


def test_lint_is_clean(workdir):
    result = snakemake(workdir, "--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


@pytest.mark.parametrize(
    "overlay, expected",
    [
        ({"experiments": {"selfstrae_channels": {"model": "bert"}}},
         "experiments.selfstrae_channels.model: unknown model 'bert'"),
        ({"languages": {"zz": {"tokenizer": {"kind": "sentencepiece"}, "eval": {"paper": ["x"]}}}},
         "languages.zz: 'corpus' is a required property"),
        # every schema error at once, one line each, under the config files' names (strae.schemas, not Snakemake's
        # dump of the schema)
        ({"data": {"resource_dir": "x"}, "scale": {"seeds": ["a"]}},
         "(config/config.yaml overlaid by %s): does not match workflow/schemas/config.schema.yaml:\n"
         "  data: Additional properties are not allowed ('resource_dir' was unexpected)\n"
         "  scale.seeds.0: 'a' is not of type 'integer'\n"),
    ],
)
def test_bad_config_fails_at_validation_naming_the_key(workdir, tmp_path, overlay, expected):
    """Through snakemake itself: the schema (validate) and the cross-key checks (strae.plan) stop the run."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(overlay))
    result = snakemake(workdir, "-n", "--cores", "1", "results/scores.csv", "--configfile", str(path))
    assert result.returncode != 0
    assert expected.replace("%s", str(path)) in result.stdout + result.stderr
    assert "Failed validating" not in result.stdout + result.stderr


def test_an_overlay_with_a_key_given_twice_is_refused_and_tab_json_still_read(workdir, tmp_path):
    """Snakemake merges an overlay whose `scale:` appears twice keeping the later block only; the Snakefile refuses it
    naming both lines. A tab-indented JSON overlay (not YAML) is read as Snakemake reads it: JSON first."""
    twice = tmp_path / "twice.yaml"
    twice.write_text("scale:\n  seeds: [0]\nscale:\n  device: cpu\n")
    result = snakemake(workdir, "-n", "--cores", "1", "results/scores.csv", "--configfile", str(twice))
    assert result.returncode != 0
    assert f"{twice}:3: key 'scale' given twice (first on line 1)" in result.stdout + result.stderr
    tabs = tmp_path / "tabs.json"
    tabs.write_text('{\n\t"scale": {\n\t\t"seeds": [0]\n\t}\n}\n')
    result = snakemake(workdir, "-n", "--cores", "1", "results/scores.csv", "--configfile", str(tabs))
    assert result.returncode == 0, result.stdout + result.stderr


def _schema_errors(config: dict) -> list[str]:
    import jsonschema

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(config)]


def test_schema_and_cross_key_errors_name_the_key():
    config = copy.deepcopy(paper_config())
    assert _schema_errors(config) == [] and plan.check_config(config) == []
    bad = copy.deepcopy(config)
    bad["scale"]["recipe_overrides"] = {"epochs": 0}
    bad["experiments"]["selfstrae_channels"]["grid"]["objective"] = ["mse"]
    bad["scale"]["typo_key"] = 1
    # removed keys are unknown keys: the figure's corpus language is config/tables.yaml's figures.*.corpus_language
    bad["report"]["node_count_language"] = "en"
    bad["languages"]["en"]["segmenter"] = "English"  # a name, not sentencex's code: it would fall back silently
    errors = "\n".join(_schema_errors(bad))
    assert "scale.recipe_overrides.epochs: 0 is less than the minimum of 1" in errors
    assert "experiments.selfstrae_channels.grid.objective.0: 'mse' is not one of" in errors
    assert "'typo_key' was unexpected" in errors
    assert "report: Additional properties are not allowed ('node_count_language' was unexpected)" in errors
    assert "languages.en.segmenter: 'English' does not match" in errors
    bad = copy.deepcopy(config)
    bad["experiments"]["selfstrae_strcse"]["grid"]["ku"] = [[128, 4]]
    bad["experiments"]["selfstrae_channels"]["languages"] = ["zz"]
    errors = plan.check_config(bad)
    assert "experiments.selfstrae_strcse: k*u = 128*4 = 512 != scale.embedding_size 256" in errors
    assert any(e.startswith("experiments.selfstrae_channels.languages: 'zz'") for e in errors)


def test_plan_expands_experiments_without_duplicates():
    config = paper_config()
    runs = plan.model_runs(config)
    keys = [(r.language, r.model, r.setting, r.seed) for r in runs]
    assert len(keys) == len(set(keys))
    assert plan.check_config(config) == []
    # SemEval Table 1's contrastive k=u=16 run and Banyan Table 1's Self-StrAE row are the same runs (both papers
    # report SimLex 13.80 +- 0.41 for it; the numbers came from the Self-StrAE code): one run directory per seed
    same_setting = [r for r in runs if r.setting == "contrastive_linear_sentential_k16_u16"]
    assert sorted({r.model for r in same_setting}) == ["selfstrae"]
    assert len(same_setting) == len(config["scale"]["seeds"])
    # the workflow names the recipe and passes no hidden values: the recipe file is the one home
    semeval = plan.train_flags(config, "selfstrae", "contrastive_linear_sentential_k16_u16", "en")
    assert "--recipe selfstrae" in semeval and "--lr" not in semeval and "--temperature" not in semeval
    assert "--set" not in semeval  # no overrides in the paper config for this run
    flags = plan.train_flags(config, "banyan", "contrastive_diagonal_entangled_k128_u2", "en")
    assert "--recipe banyan" in flags and "--structure entangled" in flags and "--k 128 --u 2" in flags
    assert "--nondeterministic" not in flags  # deterministic: true, the default
    faster = {**config, "scale": {**config["scale"], "deterministic": False}}
    assert plan.train_flags(faster, "banyan", "contrastive_diagonal_entangled_k128_u2", "en").endswith(
        " --nondeterministic")
    assert "--scatter" not in flags  # scatter: index_add, the default
    presorted = {**config, "scale": {**config["scale"], "scatter": "presorted"}}
    assert plan.train_flags(presorted, "banyan", "contrastive_diagonal_entangled_k128_u2", "en").endswith(
        " --scatter presorted")
    assert "--propagation" not in flags  # propagation: auto, the default
    for mode in ("handwritten", "autograd"):
        chosen = {**config, "scale": {**config["scale"], "propagation": mode}}
        assert plan.train_flags(chosen, "banyan", "contrastive_diagonal_entangled_k128_u2", "en").endswith(
            f" --propagation {mode}")
        assert plan.train_flags(chosen, "selfstrae", "contrastive_linear_sentential_k16_u16", "en").endswith(
            f" --propagation {mode}")


def test_table_eval_targets_are_exactly_the_tables_runs():
    config = paper_config()
    tables = yaml.safe_load((REPO / "config/tables.yaml").read_text())
    targets = plan.table_eval_targets(config, tables, "selfstrae_table2")
    seeds, variants = config["scale"]["seeds"], config["scale"]["eval_variants"]
    expected = [str(paths.eval_json("en", "selfstrae", f"ceco_linear_sentential_k{k}_u{u}", seed, variant))
                for k, u in [(8, 32), (32, 8), (64, 4), (128, 2), (256, 1)] for seed in seeds for variant in variants]
    assert sorted(targets) == sorted(expected) and len(targets) == len(set(targets))
    # a subset of every target, in the same order: one evaluation job per JSON whichever target asks for it
    everything = plan.eval_targets(config)
    assert len(everything) > len(targets)
    assert targets == [target for target in everything if target in set(targets)]
    with pytest.raises(SystemExit, match="no table 'selfstrae_table99'"):
        plan.table_eval_targets(config, tables, "selfstrae_table99")


def test_table_eval_targets_follow_enabled_runs_options_and_language_columns():
    config = copy.deepcopy(paper_config())
    tables = yaml.safe_load((REPO / "config/tables.yaml").read_text())
    glove = [t for t in plan.table_eval_targets(config, tables, "banyan_table3") if "/glove/" in t]
    assert glove == []  # declared but disabled: the cell reads "not run", nothing is trained for it
    config["baselines"]["glove"]["enabled"] = True
    glove = [t for t in plan.table_eval_targets(config, tables, "banyan_table3") if "/glove/" in t]
    settings = {Path(t).parent.name for t in glove}
    assert settings == {"words_w10_d256", "words_w10_d256@stopword_rm"}  # SETTING@OPTION rows read option JSONs
    # a table with only the plain GloVe row evaluates no option of it
    plain = {Path(t).parent.name for t in plan.table_eval_targets(config, tables, "banyan_table4") if "/glove/" in t}
    assert plain == {"words_w10_d256"}
    # a language block's column (languages.<lang>.tables) is a cell like any other: its runs are targets
    before = plan.table_eval_targets(config, tables, "selfstrae_table3")
    added = copy.deepcopy(config)
    row = tables["tables"]["selfstrae_table3"]["rows"][0]  # a new language's row copies the first language row
    source = next(run.language for run in plan.model_runs(added) if run.setting == row["setting"]
                  and run.language not in {r["language"] for r in tables["tables"]["selfstrae_table3"]["rows"]})
    added["languages"][source]["tables"] = {"selfstrae_table3": added["languages"][source]["eval"]["paper"][0]}
    after = plan.table_eval_targets(added, tables, "selfstrae_table3")
    assert set(before) < set(after)
    assert {Path(t).parts[2] for t in set(after) - set(before)} == {source}


def test_disabled_experiment_and_missing_corpus_file():
    config = copy.deepcopy(paper_config())
    for experiment in config["experiments"].values():
        experiment["enabled"] = False
    assert plan.model_runs(config) == []
    config["languages"]["zz"] = {"corpus": [{"path": "/nonexistent/corpus.txt"}],
                                 "tokenizer": {"kind": "sentencepiece"}, "eval": {"paper": ["x"]}}
    assert any(e.startswith("languages.zz: corpus file") for e in plan.check_config(config))


def test_no_language_or_grid_lists_in_workflow_code():
    """Languages, models and grids come from config only (the rule files may name no language code)."""
    config = paper_config()
    languages = set(config["languages"])
    for path in list((REPO / "workflow/rules").glob("*.smk")) + [REPO / "Snakefile", REPO / "src/strae/plan.py"]:
        text = path.read_text()
        for lang in languages:
            assert not re.search(rf"[\"'/]{lang}[\"'/]", text), f"{path.name} names language {lang!r}"
        assert "k128" not in text and "ceco_linear" not in text, f"{path.name} hard-codes a setting"


# commands that run numeric or tokeniser work (torch, numpy, SentencePiece), which take every core unless told
THREADED_COMMANDS = ("strae train", "strae evaluate", "strae measure", "strae tokenize-corpus", "strae parse-corpus")
# rules whose command is left as it is although it is not held to its threads: Snakemake reruns a job whose shell
# text changes, and these would rerun every existing corpus's tokenisation (and all downstream) or measurement
UNCAPPED_RULES = {"tokenize_corpus", "measure"}


def test_every_threaded_command_is_held_to_its_jobs_threads():
    """A job declares `threads:` so the scheduler can share cores; each command that would otherwise take every core
    is given exactly that many (OMP_NUM_THREADS={threads} or --threads {threads})."""
    for path in sorted((REPO / "workflow/rules").glob("*.smk")):
        for block in re.split(r"^rule ", path.read_text(), flags=re.M)[1:]:
            name, shell = block.split(":", 1)[0], block.partition("shell:")[2]
            commands = [c for c in THREADED_COMMANDS if re.search(rf"{c}\b", shell)]
            if commands and name not in UNCAPPED_RULES:
                assert "threads:" in block and "{threads}" in shell, f"{path.name}: rule {name} ({commands})"


def test_profiles_name_real_rules_and_dry_run(workdir):
    slurm = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    assert slurm["executor"] == "slurm" and slurm["set-resources"]["train"]["gpu"] == 1
    rules_text = "\n".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    for rule in list(slurm["set-resources"]) + list(slurm.get("set-threads", {})):
        assert re.search(rf"^rule {rule}:", rules_text, re.M), f"profiles/slurm names unknown rule {rule!r}"
    for rule, resources in slurm["set-resources"].items():  # a job asking for more cpus than it has threads idles them
        if resources.get("cpus_per_task", 1) > 1:
            assert slurm["set-threads"].get(rule) == resources["cpus_per_task"], rule
    result = snakemake(workdir, "-n", "--profile", "profiles/local", "results/table2.csv")
    assert result.returncode == 0, result.stderr + result.stdout
    gpu = yaml.safe_load((REPO / "profiles/gpu/config.yaml").read_text())
    assert gpu["resources"]["gpu"] > 1  # several training runs share one card
    result = snakemake(workdir, "-n", "--profile", "profiles/gpu", "results/table2.csv")
    assert result.returncode == 0, result.stderr + result.stdout


def test_make_demo_works_in_its_own_folder(tmp_path):
    """The quick profile's corpus, tokenizer and runs have the paper-scale ones' paths: `make demo` plans them in
    DEMO_DIR (here a dry run), with the config and the papers' numbers linked in, and writes nothing in the
    checkout's own resources/ or results/."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    demo = tmp_path / "demo"
    env = dict(os.environ, PATH=f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    before = {name: (REPO / name).exists() and sorted(p.name for p in (REPO / name).iterdir())
              for name in ("resources", "results")}
    # -o: the venv this test runs in counts as set up (never reinstalled from here)
    result = subprocess.run([make, "demo", "-o", str(SNAKEMAKE.parent / "strae"), f"DEMO_DIR={demo}",
                             "DEMO_FLAGS=-n --quiet rules", f"BIN={SNAKEMAKE.parent}",
                             f"VENV={SNAKEMAKE.parent.parent}"],
                            cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (demo / "config").resolve() == REPO / "config" and (demo / "paper_tables").resolve() == REPO / "paper_tables"
    # nothing exists in the demo folder yet: its own corpus and tokenizer are planned, not the checkout's reused
    assert re.search(r"prepare_corpus\s+1", result.stdout) and re.search(r"tokenizer\s+1", result.stdout)
    assert {name: (REPO / name).exists() and sorted(p.name for p in (REPO / name).iterdir())
            for name in ("resources", "results")} == before
