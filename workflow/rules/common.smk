# Shared definitions: config checks beyond the schema, the run plan, wildcard constraints, file patterns and
# input functions. The plan lives in strae.plan and every path in strae.paths (importable, unit-tested); this file
# only adapts them to Snakemake: a `*_PATTERN` is a strae.paths function applied to wildcards, a `get_*` function
# the same path for one job.
import functools

import yaml

from strae import paths, plan
from strae.io import atomic_open
from strae.report import measure
from strae.report.tables import load_tables

# checked while the DAG is built: a config mistake stops the workflow before any job, not hours into a training
_config_errors = plan.check_config(config)
if _config_errors:
    raise ValueError("invalid config:\n  " + "\n  ".join(_config_errors))

RES = config["data"]["resources_dir"]
SCALE = config["scale"]
# one device for every job (strae.runtime.resolve_device); a cpu-only scale asks the scheduler for no GPU
DEVICE = SCALE.get("device", "auto")
GPUS_PER_JOB = 0 if DEVICE == "cpu" else 1
TABLES_FILE = config["report"]["tables"]
TABLES = load_tables(TABLES_FILE)  # validated against workflow/schemas/tables.schema.yaml
PAPER_TABLES_DIR = config["report"]["paper_tables_dir"]

MODEL_RUNS = plan.model_runs(config)
EVAL_TARGETS = plan.eval_targets(config)
# the papers whose tables the `table` rule builds from the config's experiments and baselines (multiview.smk has its
# own), each from its own results/scores/<table>.csv
TABLE_PAPERS = plan.SCORE_TABLE_PAPERS
# (report subcategory, label) of each paper's tables in `snakemake --report`
PAPER_REPORT_NAMES = {"selfstrae": ("Self-StrAE (SemEval 2024)", "Self-StrAE"), "banyan": ("Banyan", "Banyan")}
TABLE_KEYS = [f"{paper}_table{n}" for paper in TABLE_PAPERS for n in plan.table_numbers(TABLES, paper)]
TABLE_TARGETS = [str(paths.table_file(key, ext)) for key in TABLE_KEYS for ext in ("csv", "md")]
# the `figure` rule's figures; the multi-view workflow draws its own (multiview.smk: MV_FIGURES)
FIGURES = {name: spec for name, spec in TABLES.get("figures", {}).items()
           if spec["kind"] not in plan.MULTIVIEW_FIGURE_KINDS}
FIGURE_TARGETS = [str(paths.figure_file(name, ext)) for name in FIGURES for ext in ("png", "pdf")]
# what `strae measure` measures: parameter counts (tables) and the model-based figures' measurements
MEASUREMENTS = measure.measurement_names(TABLES)

# The merged config (config.yaml + every --configfile overlay) as one file the CLIs read with --config, so an
# overlay such as quick.yaml or a test's extra language reaches them. Rewritten only when its content changes.
# Written when the workflow starts executing jobs (onstart), never while parsing: `snakemake -n`, --lint,
# --report and a run with nothing to do write no files. onstart runs before the first job is scheduled.
EFFECTIVE_CONFIG = str(paths.effective_config())
_effective_text = yaml.safe_dump(dict(config), sort_keys=False)


def write_effective_config():
    if not os.path.exists(EFFECTIVE_CONFIG) or open(EFFECTIVE_CONFIG, encoding="utf-8").read() != _effective_text:
        with atomic_open(EFFECTIVE_CONFIG, "w", encoding="utf-8") as _handle:
            _handle.write(_effective_text)


onstart:
    write_effective_config()

# The baselines' model names are the keys of `baselines:`; Self-StrAE/Banyan presets are the keys of `models:`.
TRAINABLE_MODELS = list(config["models"])
BASELINE_MODELS = list(config.get("baselines") or {})


wildcard_constraints:
    lang="|".join(sorted(config["languages"])),
    model="|".join(sorted(TRAINABLE_MODELS + BASELINE_MODELS)),
    # no "@" in a setting: `{setting}{option}` then splits one way only
    setting=r"[A-Za-z0-9_]+",
    # empty, or "@OPTION" for a baseline's evaluation option (baselines.<model>.eval_options.<OPTION>)
    option=r"(@[a-z0-9_]+)?",
    seed=r"\d+",
    variant="|".join(sorted(["paper", "official"])),
    n=r"\d+",
    table_dir="|".join(paths.table_dir(paper) for paper in TABLE_PAPERS),
    table="|".join(TABLE_KEYS),
    figure="|".join(sorted(FIGURES)) or "none",
    measurement="|".join(sorted(MEASUREMENTS)),


# ------------------------------------------------------------------ file patterns (strae.paths on wildcards)
CORPUS_PATTERNS = {split: str(paths.corpus_file("{lang}", split, RES)) for split in paths.SPLITS}
CORPUS_META_PATTERN = str(paths.corpus_meta("{lang}", RES))
TOKENIZER_PATTERN = str(paths.tokenizer_model("{lang}", RES))
# output names of `strae tokenize-corpus`'s files: train_ids, train_offsets, train_meta, dev_ids, ...
_TOKENIZED_NAMES = {"ids.npy": "ids", "offsets.npy": "offsets", "json": "meta"}
TOKENIZED_PATTERNS = {f"{split}_{name}": str(paths.tokenized_file("{lang}", split, suffix, RES))
                      for split in paths.SPLITS for suffix, name in _TOKENIZED_NAMES.items()}
LANGUAGE_FILES_PATTERN = str(paths.language_files_manifest("{lang}", "{part}", RES))
TRAIN_RECORD_PATTERN = str(paths.train_record("{lang}", "{model}", "{setting}", "{seed}"))
EVAL_PATTERN = str(paths.eval_json("{lang}", "{model}", "{setting}{option}", "{seed}", "{variant}"))
SCORES = str(paths.scores_csv())
TABLE_SCORES_PATTERN = str(paths.table_scores_csv("{table}"))
TABLE_PATTERNS = {ext: str(paths.table_path("{table_dir}", "{n}", ext)) for ext in ("csv", "md")}
MEASUREMENT_PATTERN = str(paths.measurement_json("{measurement}"))
PARAM_COUNTS = str(paths.measurement_json(measure.PARAM_COUNTS))
FIGURE_PATTERNS = {ext: str(paths.figure_file("{figure}", ext)) for ext in ("png", "pdf")}


# -------------------------------------------------------------------------------- input and param functions
def get_corpus(wildcards):
    """The prepared corpus' splits, {train: ..., dev: ...}."""
    return {split: str(paths.corpus_file(wildcards.lang, split, RES)) for split in paths.SPLITS}


def get_corpus_dir(wildcards):
    return str(paths.corpus_dir(wildcards.lang, RES))


def get_tokenizer(wildcards):
    return str(paths.tokenizer_model(wildcards.lang, RES))


def get_tokenized(wildcards, splits=paths.SPLITS):
    """What a trainer reads of the tokenised corpus: ids and offsets of each split ({train_ids: ..., ...})."""
    return {f"{split}_{_TOKENIZED_NAMES[suffix]}": str(paths.tokenized_file(wildcards.lang, split, suffix, RES))
            for split in splits for suffix in ("ids.npy", "offsets.npy")}


def get_tokenized_train(wildcards):
    return get_tokenized(wildcards, splits=("train",))


def get_tokenized_dir(wildcards):
    return str(paths.tokenized_dir(wildcards.lang, RES))


def get_run_dir(wildcards):
    return str(paths.run_dir(wildcards.lang, wildcards.model, wildcards.setting, wildcards.seed))


def get_train_flags(wildcards):
    return plan.train_flags(config, wildcards.model, wildcards.setting, wildcards.lang)


def get_train_recipe(wildcards):
    """The recipe's values the run trains with (src/strae/recipes.yaml, the config's overrides applied) as a param:
    the flags name the recipe only, so an edited recipe would otherwise leave its finished runs in place."""
    import json

    run = plan.Run(wildcards.lang, wildcards.model, wildcards.setting, int(wildcards.seed))
    recipe = plan.run_recipe(config, run)
    return json.dumps(recipe.values() if recipe is not None else {}, sort_keys=True)


@functools.lru_cache(maxsize=None)
def _task_catalog(path):
    from strae.evaluate.tasks import load_tasks

    return load_tasks(path)


def get_eval_task_specs(wildcards):
    """What each task of the evaluation reads and how it scores (file, format, rows, aggregation, pooling, ...;
    config/tasks.yaml and the language's inline sets, notes left out) as a param: the task names alone would leave
    a changed definition's scores in place (the evaluation files' manifest is ancient)."""
    import dataclasses
    import json

    from strae.evaluate.tasks import language_tasks, tasks_file

    catalog = _task_catalog(tasks_file(config))
    specs = [{k: v for k, v in dataclasses.asdict(task).items() if k != "note"}
             for task in language_tasks(catalog, config, wildcards.lang, wildcards.variant)]
    return json.dumps(specs, sort_keys=True, default=str)


def get_measure_settings(wildcards):
    """What a measurement reads besides its inputs: its figure's spec in config/tables.yaml and the report keys
    `strae measure` takes from the config (a param, so the tables file's other edits re-run no measurement)."""
    import json

    report_keys = {k: v for k, v in (config.get("report") or {}).items()
                   if k in ("node_count_batch_sizes", "geometry_pairs")}
    return json.dumps({"figure": FIGURES.get(wildcards.measurement), "report": report_keys}, sort_keys=True,
                      default=str)


def get_eval_tasks(wildcards):
    # a param (Snakemake's params rerun trigger): adding a task to a language re-runs its evaluations
    return ",".join(config["languages"][wildcards.lang]["eval"][wildcards.variant])


def get_encoder_options(wildcards):
    """`--encoder-option` flags of an evaluation option (`SETTING@OPTION`: baselines.<model>.eval_options.<OPTION>);
    empty for a plain evaluation."""
    if not wildcards.option:
        return ""
    option = wildcards.option.removeprefix("@")
    declared = ((config.get("baselines") or {}).get(wildcards.model) or {}).get("eval_options") or {}
    if option not in declared:
        raise ValueError(f"{wildcards.model}/{wildcards.setting}{wildcards.option}: no evaluation option {option!r} "
                         f"under baselines.{wildcards.model}.eval_options")
    return " ".join(f"--encoder-option {value}" for value in declared[option])


def get_eval_sets_settings(wildcards):
    """The language block's inline eval sets (file, format, level, ...) as a param: editing one re-runs evaluation."""
    import json

    return json.dumps(config["languages"][wildcards.lang].get("eval_sets") or {}, sort_keys=True)


def get_language_files(wildcards):
    """What fetch_language_files places for a language's part (as a param: a changed task list or set re-runs it)."""
    import json

    from strae.data.fetch import language_files

    return json.dumps(language_files(wildcards.lang, config, part=wildcards.part), sort_keys=True)


def get_evaluation_files(wildcards):
    """The manifest of the language's evaluation sets: placed by a fetch job, so evaluation itself runs offline.
    ancient: the evaluations wait for it, but a rewritten manifest (its timestamp) re-runs none of them."""
    return ancient(str(paths.language_files_manifest(wildcards.lang, "evaluation", RES)))


def get_senteval_files(wildcards):
    """The manifest a SentEval job waits for: the multi-view paper's files (book corpus, parser wheel, SentEval
    transfer files) for suite senteval, SentEval's probing files for suite probing; ancient, as get_evaluation_files."""
    part = "probing" if wildcards.suite == "probing" else "multiview"
    return ancient(str(paths.language_files_manifest(wildcards.lang, part, RES)))


def _multiview_languages():
    multiview = config.get("multiview") or {}
    return sorted(multiview.get("languages") or []) if multiview.get("enabled") else []


# every fetch manifest: fetch_all's files beside corpora and tokenizers
FETCHED_MANIFESTS = [str(paths.language_files_manifest(lang, "evaluation", RES)) for lang in sorted(config["languages"])]
FETCHED_MANIFESTS += [str(paths.language_files_manifest(lang, "multiview", RES)) for lang in _multiview_languages()]
if ((config.get("multiview") or {}).get("senteval") or {}).get("probing"):
    FETCHED_MANIFESTS += [str(paths.language_files_manifest(lang, "probing", RES)) for lang in _multiview_languages()]

# the compute rules' jobs never reach the Hugging Face hub (every download is a fetch rule's)
OFFLINE = "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1"


def get_tokenizer_inputs(wildcards):
    """A trained tokenizer needs the prepared corpus; a BPEmb one only its (fetched) model file, unless it is named
    by language code and may fall back to training on the corpus (offline)."""
    spec = config["languages"][wildcards.lang]["tokenizer"]
    if spec["kind"] == "sentencepiece" or (spec.get("language") and spec.get("fallback", "sentencepiece") != "none"):
        return {"corpus": str(paths.corpus_file(wildcards.lang, "train", RES))}
    return {}


def get_tokenizer_corpus_flag(wildcards):
    inputs = get_tokenizer_inputs(wildcards)
    return f"--corpus {inputs['corpus']}" if inputs else ""


def _table_paper(wildcards):
    return next(paper for paper in TABLE_PAPERS if paths.table_dir(paper) == wildcards.table_dir)


def get_table_key(wildcards):
    """The config/tables.yaml key of a table target: results/[<paper>/]table<N> -> <paper>_table<N>."""
    return f"{_table_paper(wildcards)}_table{wildcards.n}"


def get_table_scores(wildcards):
    """The table's own scores file: only the evaluations its cells read (not results/scores.csv of every run)."""
    return str(paths.table_scores_csv(get_table_key(wildcards)))


def get_table_eval_targets(wildcards):
    return plan.table_eval_targets(config, TABLES, wildcards.table)


def get_paper_table(wildcards):
    """The paper's published numbers for a table, when transcribed (a missing file means paper cells read n/a)."""
    name = TABLES["tables"][get_table_key(wildcards)].get("paper_file")
    path = os.path.join(PAPER_TABLES_DIR, name) if name else None
    return [path] if path and os.path.exists(path) else []


def get_table_languages(wildcards):
    """languages.<lang>.tables entries for one table, as a param: adding a language to a table re-runs it."""
    key = get_table_key(wildcards)
    return " ".join(sorted(f"{lang}={block['tables'][key]}" for lang, block in config["languages"].items()
                           if (block.get("tables") or {}).get(key))) or "none"


def get_table_report_subcategory(wildcards):
    return PAPER_REPORT_NAMES[_table_paper(wildcards)][0]


def table_report_labels(ext):
    """The `labels` function of a table's `ext` file in `snakemake --report`."""

    def get_labels(wildcards):
        paper = PAPER_REPORT_NAMES[_table_paper(wildcards)][1]
        return {"paper": paper, "table": wildcards.n, "file": ext}

    return get_labels


def get_measure_runs(wildcards):
    """Training records of the runs a measurement reads (a model-based figure's: geometry, node counts)."""
    runs = plan.measurement_runs(MODEL_RUNS, FIGURES.get(wildcards.measurement) or {})
    return [str(paths.train_record(run.language, run.model, run.setting, run.seed)) for run in runs]


def get_measure_tokenized(wildcards):
    """The tokenised corpus (both splits' ids) a figure measurement samples sentences from."""
    lang = (FIGURES.get(wildcards.measurement) or {}).get("corpus_language")
    return [str(paths.tokenized_file(lang, split, "ids.npy", RES)) for split in paths.SPLITS] if lang else []


def get_counted_settings(wildcards):
    """param_counts: the settings it counts (a params rerun trigger); nothing for a figure's measurement."""
    return " ".join(measure.counted_settings(config)) if wildcards.measurement == measure.PARAM_COUNTS else ""


def get_measure_corpus_flag(wildcards):
    lang = (FIGURES.get(wildcards.measurement) or {}).get("corpus_language")
    return f"--corpus-dir {paths.tokenized_dir(lang, RES)}" if lang else ""


def get_figure_scores(wildcards):
    return [SCORES] if FIGURES[wildcards.figure].get("from_scores") else []


def get_figure_measurement(wildcards):
    return [str(paths.measurement_json(wildcards.figure))] if wildcards.figure in MEASUREMENTS else []


def get_baseline_init_run(wildcards):
    """SimCSE continues the RoBERTa run of the same language and seed (baselines.roberta_simcse.init)."""
    init = config["baselines"]["roberta_simcse"].get("init", "roberta")
    spec = config["baselines"][init]
    return str(paths.train_record(wildcards.lang, init, spec["setting"], wildcards.seed))


def get_baseline_init_dir(wildcards):
    return os.path.dirname(get_baseline_init_run(wildcards))


def _language_settings(wildcards, keys):
    """The config values a language's prepared data depends on; as a param, a change re-runs preparation
    (Snakemake's params rerun trigger) even though the CLIs read them from the effective config file."""
    import json

    data = {key: value for key, value in config["data"].items() if key not in ("registry", "tasks")}
    block = config["languages"][wildcards.lang]
    # only what preparation/tokenisation reads (not eval task lists, which evaluation params track)
    language = {key: block.get(key) for key in keys}
    return json.dumps({"data": data, "language": language}, sort_keys=True)


def get_corpus_settings(wildcards):
    return _language_settings(wildcards, ("corpus", "dev_corpus", "paper_source", "segmenter", "tokenizer",
                                          "pretokenize"))


def get_preparation_settings(wildcards):
    """get_corpus_settings without pretokenize: the prepared text is raw, shared by every pretokenisation."""
    return _language_settings(wildcards, ("corpus", "dev_corpus", "paper_source", "segmenter", "tokenizer"))


def get_stopwords_flag(wildcards):
    """GloVe's stop-word list language (stopwordsiso code) from the language block, when it names one."""
    code = config["languages"][wildcards.lang].get("stopwords_language")
    return f"--stopwords-language {code}" if code else ""


def get_simcse_steps_flag(wildcards):
    steps = config["baselines"]["roberta_simcse"].get("max_steps")
    return f"--steps {steps}" if steps else ""
