# Definitions for workflow/rules/multiview.smk (the multi-view paper): run list, targets, input/param functions.
# Everything is read from the `multiview:` block of the config.
import functools
from pathlib import Path

from baselines.multiview import config_settings as _mv_config_settings
from baselines.multiview import FLOOR_DIM as MV_FLOOR_DIM
from baselines.multiview import floor_dims as _mv_floor_dims
from strae.data.registry import load_registry as _mv_load_registry
from strae.evaluate.senteval import CONFIG_KEYS as SENTEVAL_CONFIG_KEYS

MV = config.get("multiview") or {}
MV_ENABLED = bool(MV.get("enabled", False))
MV_TRAIN = MV.get("train") or {}
MV_SENTEVAL = MV.get("senteval") or {}
MV_CURVE = MV.get("curve") or {}
_MV_REGISTRY = _mv_load_registry(config["data"]["registry"]) if MV_ENABLED else {}


_MV_PARSE = MV.get("parse") or {}
# a parse directory per parse setting, so a quick overlay never meets a paper-scale parse (parse-corpus refuses that)
MV_PARSE_NAME = f"p{_MV_PARSE.get('paragraphs_per_book') or 'all'}_s{_MV_PARSE.get('max_sentences') or 'all'}"


# run-directory setting of each multi-view model (strae train-multiview's default name); the tables' rows read it too
MV_SETTINGS = _mv_config_settings(config)
# widths of the random-token floors scored beside them (multiview.senteval.random_token), each its own run dim<N>
MV_FLOOR_DIMS = _mv_floor_dims(config)


def _mv_runs():
    return [(lang, model, setting, seed)
            for lang in MV.get("languages", []) for model, setting in MV_SETTINGS.items() for seed in MV.get("seeds", [0])]


@functools.lru_cache(maxsize=None)
def _mv_senteval_catalog(path):
    from strae.evaluate.senteval import load_senteval_tasks

    return load_senteval_tasks(path)


def mv_transfer_tasks(lang):
    """Names of the SentEval transfer tasks `lang` scores (strae.evaluate.senteval.suite_tasks: the configured
    tasks of that language); none for a language without SentEval data, which then gets no SentEval job."""
    from strae.evaluate.senteval import suite_tasks
    from strae.evaluate.tasks import tasks_file

    path = tasks_file(config)
    return [task.name for task in suite_tasks(_mv_senteval_catalog(path), lang, MV_SENTEVAL, path)]


def _mv_has_probing(lang):
    from strae.evaluate.tasks import tasks_file

    return any(t.group == "probing" and t.language == lang for t in _mv_senteval_catalog(tasks_file(config)).values())


def _mv_senteval_jsons():
    scored = [lang for lang in MV.get("languages", []) if mv_transfer_tasks(lang)]  # the languages with SentEval
    jsons = [str(paths.eval_json(lang, model, setting, seed, "senteval"))
             for lang, model, setting, seed in _mv_runs() if lang in scored]
    for lang in scored:
        # the random-token floor: what the probes reach with no trained encoder at all, at each width asked for
        jsons += [str(paths.eval_json(lang, "random-token", f"dim{dim}", 0, "senteval")) for dim in MV_FLOOR_DIMS]
        for extra in MV_SENTEVAL.get("extra_runs", []):
            jsons += [str(paths.eval_json(lang, extra["model"], extra["setting"], seed, "senteval"))
                      for seed in SCALE["seeds"]]
    return jsons


MV_EVAL_JSONS = (_mv_senteval_jsons() + [
    str(paths.eval_json(lang, model, setting, seed, variant))
    for lang, model, setting, seed in _mv_runs() for variant in MV.get("sts_variants", ["paper"])
] + [
    # Table 2: SentEval's probing tasks, scored only when asked (their files need a network): their own JSONs, so
    # Table 1's scores stand whether or not they are
    str(paths.eval_json(lang, model, setting, seed, "probing"))
    for lang, model, setting, seed in _mv_runs() if MV_SENTEVAL.get("probing", False) and _mv_has_probing(lang)
]) if MV_ENABLED else []


def mv_curve_tasks(lang):
    """The curve's tasks (multiview.curve.tasks) that are `lang`'s own, in the list's order; none: no curve."""
    from strae.evaluate.senteval import suite_tasks
    from strae.evaluate.tasks import tasks_file

    path = tasks_file(config)
    return [task.name for task in suite_tasks(_mv_senteval_catalog(path), lang, {"tasks": MV_CURVE.get("tasks") or []},
                                              path)] if MV_CURVE.get("tasks") else []


def _mv_keeps_curve(lang, seed):
    return bool(MV_CURVE.get("every_sentences")) and int(seed) in MV_CURVE.get("seeds", [0]) \
        and bool(mv_curve_tasks(lang))


# the paper's Figure 2: each curve run's points scored (strae evaluate --suite senteval --curve), then drawn
MV_CURVE_JSONS = [str(paths.curve_json(lang, model, setting, seed))
                  for lang, model, setting, seed in _mv_runs() if _mv_keeps_curve(lang, seed)] if MV_ENABLED else []
MV_FIGURES = sorted(name for name, spec in TABLES.get("figures", {}).items()
                    if spec["kind"] in plan.MULTIVIEW_FIGURE_KINDS)
MV_FIGURE_TARGETS = [str(paths.multiview_figure_file(name, ext)) for name in MV_FIGURES for ext in ("png", "pdf")] \
    if MV_CURVE_JSONS else []
MV_TABLE_TARGETS = [str(paths.table_file(f"multiview_table{n}", ext)) for n in (1, 2) for ext in ("csv", "md")] \
    if MV_ENABLED else []
MV_PARSES_PATTERN = str(paths.parses_dir("{lang}", MV_PARSE_NAME, RES) / "meta.json")
# its own scores.csv: the Self-StrAE/Banyan tables never wait for multi-view runs, nor these for theirs
MV_SCORES = str(paths.scores_csv(Path(paths.DEFAULT_RESULTS) / "multiview"))


def mv_corpus_file(wildcards):
    spec = MV["corpora"][wildcards.lang]
    if "registry" in spec:
        return str(paths.data_file(_MV_REGISTRY[spec["registry"]].path, RES))
    return spec["path"]


def mv_resources_dir(wildcards):
    """data.resources_dir, where `strae fetch` places the corpus and wheel (a function: --lint flags a path param
    that prefixes an output when it is a plain string)."""
    return RES


def mv_parses_dir(wildcards):
    return str(paths.parses_dir(wildcards.lang, MV_PARSE_NAME, RES))


def mv_corpus_label(wildcards):
    spec = MV["corpora"][wildcards.lang]
    return spec.get("registry") or spec.get("path")


def mv_parser_flags(wildcards):
    parser = MV["parsers"][wildcards.lang]
    flags = [f"--pipeline {parser['pipeline']}"] + [f"--fallback-pipeline {p}" for p in parser.get("fallbacks", [])]
    if parser.get("wheel"):
        entry = _MV_REGISTRY[parser["wheel"]]
        flags += [f"--install-wheel {paths.data_file(entry.path, RES)}", f"--wheel-sha256 {entry.sha256}"]
    parse = MV.get("parse") or {}
    for key in ("paragraphs_per_book", "max_sentences"):
        if parse.get(key) is not None:
            flags.append(f"--{key.replace('_', '-')} {parse[key]}")
    return " ".join(flags)


def mv_fetch_names(wildcards):
    names = [MV["corpora"][wildcards.lang]["registry"]] if "registry" in MV["corpora"][wildcards.lang] else []
    wheel = MV["parsers"][wildcards.lang].get("wheel")
    return " ".join(names + ([wheel] if wheel else []))


def mv_train_flags(wildcards):
    flags = [f"--model {wildcards.model.removeprefix('multiview_')}", f"--setting {wildcards.setting}"]
    for key in ("vocab_size", "embedding_dim", "hidden", "lr", "clip_grad_norm", "batch_size", "max_tokens",
                "sentences_per_book", "max_sentences", "max_steps", "threads"):
        if MV_TRAIN.get(key) is not None:
            flags.append(f"--{key.replace('_', '-')} {MV_TRAIN[key]}")
    if (MV_TRAIN.get("epochs") or 1) != 1:  # one epoch, the paper's, is the command as it always was (no rerun)
        flags.append(f"--epochs {MV_TRAIN['epochs']}")
    if MV_TRAIN.get("own_view", "excluded") != "excluded":  # likewise the default objective
        flags.append(f"--own-view {MV_TRAIN['own_view']}")
    if _mv_keeps_curve(wildcards.lang, wildcards.seed):  # not part of the recipe: the weights are the same
        flags.append(f"--curve-every {MV_CURVE['every_sentences']}")
    return " ".join(flags)


def mv_curve_flags(wildcards):
    """The curve's evaluation: its tasks, and the SentEval settings the transfer suite's command passes."""
    flags = [f"--tasks {','.join(mv_curve_tasks(wildcards.lang))}"]
    if MV_SENTEVAL.get("inner_folds"):
        flags.append(f"--inner-folds {MV_SENTEVAL['inner_folds']}")
    return " ".join(flags)


def mv_curve_task_specs(wildcards):
    """What the curve's tasks read and how they fit (config/tasks.yaml), as a param: an edited definition scores
    the curve again (as mv_senteval_task_specs for the transfer suite)."""
    import dataclasses
    import json

    from strae.evaluate.tasks import tasks_file

    catalog = _mv_senteval_catalog(tasks_file(config))
    return json.dumps([dataclasses.asdict(catalog[name]) for name in mv_curve_tasks(wildcards.lang)], sort_keys=True,
                      default=str)


def mv_curve_files(wildcards):
    """The SentEval files the curve's tasks read (the multi-view manifest; ancient, as get_senteval_files)."""
    return ancient(str(paths.language_files_manifest(wildcards.lang, "multiview", RES)))


def mv_senteval_model(wildcards):
    if wildcards.model == "random-token":
        return "random-token"
    return get_run_dir(wildcards)


def mv_senteval_inputs(wildcards):
    if wildcards.model == "random-token":
        return []
    return [str(paths.train_record(wildcards.lang, wildcards.model, wildcards.setting, wildcards.seed))]


def mv_senteval_flags(wildcards):
    # the floor's width is its setting (dim2000); the default width's command is as it always was (a changed
    # command would score the records' 256-d floors again)
    width = wildcards.setting.removeprefix("dim")
    flags = [f"--encoder-option dim={width}"] if wildcards.model == "random-token" and width != str(MV_FLOOR_DIM) else []
    if wildcards.suite == "probing":
        return " ".join(flags)  # every probing task of the language (config/tasks.yaml, group probing)
    # the configured tasks of this language (for a list of one language's tasks, the list as it always was)
    flags += [f"--tasks {','.join(mv_transfer_tasks(wildcards.lang))}"] if MV_SENTEVAL.get("tasks") else []
    if MV_SENTEVAL.get("inner_folds"):
        flags.append(f"--inner-folds {MV_SENTEVAL['inner_folds']}")
    return " ".join(flags)


def mv_senteval_runtime(wildcards):
    """Minutes: the transfer tasks take minutes an encoder; the probing tasks encode 1.2M sentences and fit 70
    logistic regressions on 100k vectors (not timed here: no probing file is on this project's machines)."""
    return 24 * 60 if wildcards.suite == "probing" else 4 * 60


def mv_senteval_mem_mb(wildcards):
    # 120k x 2,000 vectors a task (float64 in sklearn: 1.9 GB); each classifier fit running beside another
    # (strae evaluate --jobs: the job's threads) holds its own copy of a fold's training rows
    fits_beside = max(0, int(SCALE.get("eval_threads", 1)) - 1)
    return (16000 + 2000 * fits_beside) if wildcards.suite == "probing" else (8000 + 500 * fits_beside)


def mv_senteval_task_specs(wildcards):
    """What each SentEval task of the job reads and how it fits (files, rows, features, c_grid, folds, label ids:
    config/tasks.yaml's `senteval_tasks:`), as a param: an edited definition scores again (the files' manifest is
    ancient). The selection is the CLI's own (strae.evaluate.senteval.select_tasks)."""
    import dataclasses
    import json

    from strae.evaluate.senteval import select_tasks
    from strae.evaluate.tasks import tasks_file

    path = tasks_file(config)
    tasks = select_tasks(_mv_senteval_catalog(path), wildcards.lang, wildcards.suite, None, path, MV_SENTEVAL)
    return json.dumps([dataclasses.asdict(task) for task in tasks], sort_keys=True, default=str)


def mv_senteval_settings(wildcards):
    """What the SentEval CLI reads of the multi-view senteval block (strae.evaluate.senteval.CONFIG_KEYS: max_iter,
    ...), as a param: editing it scores again; the rest of the block (floor widths, probing, extra runs) does not.
    The default classifier (sklearn, or the key absent) reads as before the key existed: no result scores again."""
    import json

    settings = {key: MV_SENTEVAL.get(key) for key in SENTEVAL_CONFIG_KEYS}
    if settings.get("classifier") in (None, "sklearn"):
        del settings["classifier"]
    return json.dumps(settings, sort_keys=True, default=str)
