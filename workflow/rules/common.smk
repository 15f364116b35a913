# Shared definitions: config checks beyond the schema, the run plan, wildcard constraints, input functions.
# The plan itself lives in strae.plan (importable, unit-tested); this file only adapts it to Snakemake.
import yaml

from strae import plan
from strae.io import atomic_open

_config_errors = plan.check_config(config)
if _config_errors:
    raise ValueError("invalid config:\n  " + "\n  ".join(_config_errors))

RES = config["data"]["resources_dir"]
SCALE = config["scale"]
# one device for every job (strae.runtime.resolve_device); a cpu-only scale asks the scheduler for no GPU
DEVICE = SCALE.get("device", "auto")
GPUS_PER_JOB = 0 if DEVICE == "cpu" else 1
TABLES_FILE = config["report"]["tables"]
with open(TABLES_FILE, encoding="utf-8") as _handle:
    TABLES = yaml.safe_load(_handle)
PAPER_TABLES_DIR = config["report"]["paper_tables_dir"]

MODEL_RUNS = plan.model_runs(config)
EVAL_TARGETS = plan.eval_targets(config)
SELFSTRAE_TABLES = plan.table_numbers(TABLES, "selfstrae")
BANYAN_TABLES = plan.table_numbers(TABLES, "banyan")
TABLE_TARGETS = [f"results/table{n}.{ext}" for n in SELFSTRAE_TABLES for ext in ("csv", "md")] + [
    f"results/banyan/table{n}.{ext}" for n in BANYAN_TABLES for ext in ("csv", "md")
]
FIGURES = TABLES.get("figures", {})

# The merged config (config.yaml + every --configfile overlay) as one file the CLIs read with --config, so an
# overlay such as quick.yaml or a test's extra language reaches them. Rewritten only when its content changes.
# Written when the workflow starts executing jobs (onstart), never while parsing: `snakemake -n`, --lint,
# --report and a run with nothing to do write no files. onstart runs before the first job is scheduled.
EFFECTIVE_CONFIG = "results/config.effective.yaml"
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
    setting=r"[A-Za-z0-9_]+",
    option=r"[a-z0-9_]+",
    seed=r"\d+",
    variant="|".join(sorted(["paper", "official"])),
    n=r"\d+",
    figure="|".join(sorted(FIGURES)) or "none",


def run_dir(wildcards):
    return f"results/runs/{wildcards.lang}/{wildcards.model}/{wildcards.setting}/seed{wildcards.seed}"


def train_flags(wildcards):
    return plan.train_flags(config, wildcards.model, wildcards.setting, wildcards.lang)


def eval_tasks(wildcards):
    return ",".join(config["languages"][wildcards.lang]["eval"][wildcards.variant])


def encoder_options(wildcards):
    options = config["baselines"][wildcards.model]["eval_options"][wildcards.option]
    return " ".join(f"--encoder-option {option}" for option in options)


LANGUAGES_WITH_EVAL_SETS = sorted(lang for lang, block in config["languages"].items() if block.get("eval_sets"))


def eval_sets_settings(wildcards):
    """The language block's inline eval sets (file, format, level, ...) as a param: editing one re-runs evaluation."""
    import json

    return json.dumps(config["languages"][wildcards.lang].get("eval_sets") or {}, sort_keys=True)


def tokenizer_inputs(wildcards):
    """A trained tokenizer needs the prepared corpus; a BPEmb one only its (fetched) model file, unless it is named
    by language code and may fall back to training on the corpus (offline)."""
    spec = config["languages"][wildcards.lang]["tokenizer"]
    if spec["kind"] == "sentencepiece" or (spec.get("language") and spec.get("fallback", "sentencepiece") != "none"):
        return {"corpus": f"{RES}/corpora/{wildcards.lang}/train.txt"}
    return {}


def tokenizer_corpus_flag(wildcards):
    inputs = tokenizer_inputs(wildcards)
    return f"--corpus {inputs['corpus']}" if inputs else ""


def _paper_table(key):
    """The paper's published numbers for a table, when transcribed (a missing file means paper cells read n/a)."""
    name = TABLES["tables"][key].get("paper_file")
    path = os.path.join(PAPER_TABLES_DIR, name) if name else None
    return [path] if path and os.path.exists(path) else []


def _table_languages(key):
    """languages.<lang>.tables entries for one table, as a param: adding a language to a table re-runs it."""
    return " ".join(sorted(f"{lang}={block['tables'][key]}" for lang, block in config["languages"].items()
                           if (block.get("tables") or {}).get(key))) or "none"


def selfstrae_table_languages(wildcards):
    return _table_languages(f"selfstrae_table{wildcards.n}")


def banyan_table_languages(wildcards):
    return _table_languages(f"banyan_table{wildcards.n}")


def selfstrae_paper_table(wildcards):
    return _paper_table(f"selfstrae_table{wildcards.n}")


def banyan_paper_table(wildcards):
    return _paper_table(f"banyan_table{wildcards.n}")


def figure_runs(wildcards):
    """Training records of the runs a model-based figure reads (geometry, node counts)."""
    spec = FIGURES[wildcards.figure]
    selector = spec.get("runs")
    if not selector:
        return []
    runs = plan.runs_matching(MODEL_RUNS, **selector)
    if spec.get("settings"):
        runs = [run for run in runs if run.setting in spec["settings"].values()]
    return [f"{run.run_dir}/train.json" for run in runs]


def figure_tokenized(wildcards):
    spec = FIGURES[wildcards.figure]
    lang = spec.get("corpus_language")
    return [f"{RES}/tokenized/{lang}/{split}.ids.npy" for split in ("train", "dev")] if lang else []


def figure_scores(wildcards):
    return ["results/scores.csv"] if FIGURES[wildcards.figure].get("from_scores") else []


FIGURE_TARGETS = [f"results/figures/{name}.{ext}" for name in FIGURES for ext in ("png", "pdf")]


def baseline_init_run(wildcards):
    """SimCSE continues the RoBERTa run of the same language and seed (baselines.roberta_simcse.init)."""
    init = config["baselines"]["roberta_simcse"].get("init", "roberta")
    spec = config["baselines"][init]
    return f"results/runs/{wildcards.lang}/{init}/{spec['setting']}/seed{wildcards.seed}/train.json"


def baseline_init_dir(wildcards):
    return os.path.dirname(baseline_init_run(wildcards))


def tokenized_dir(wildcards):
    return f"{RES}/tokenized/{wildcards.lang}"


def corpus_dir(wildcards):
    return f"{RES}/corpora/{wildcards.lang}"


def _language_settings(wildcards, keys):
    """The config values a language's prepared data depends on; as a param, a change re-runs preparation
    (Snakemake's params rerun trigger) even though the CLIs read them from the effective config file."""
    import json

    data = {key: value for key, value in config["data"].items() if key not in ("registry", "tasks")}
    block = config["languages"][wildcards.lang]
    # only what preparation/tokenisation reads (not eval task lists, which evaluation params track)
    language = {key: block.get(key) for key in keys}
    return json.dumps({"data": data, "language": language}, sort_keys=True)


def corpus_settings(wildcards):
    return _language_settings(wildcards, ("corpus", "dev_corpus", "paper_source", "segmenter", "tokenizer",
                                          "pretokenize"))


def preparation_settings(wildcards):
    """corpus_settings without pretokenize: the prepared text is raw, shared by every pretokenisation."""
    return _language_settings(wildcards, ("corpus", "dev_corpus", "paper_source", "segmenter", "tokenizer"))


def stopwords_flag(wildcards):
    """GloVe's stop-word list language (stopwordsiso code) from the language block, when it names one."""
    code = config["languages"][wildcards.lang].get("stopwords_language")
    return f"--stopwords-language {code}" if code else ""


def simcse_steps_flag(wildcards):
    steps = config["baselines"]["roberta_simcse"].get("max_steps")
    return f"--steps {steps}" if steps else ""
