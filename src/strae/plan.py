"""The workflow's plan: which runs a (validated) config asks for, and config checks JSON Schema cannot express.

The Snakefile imports this module so the DAG, the tests and anyone scripting around the workflow agree on one
expansion of `experiments:` / `baselines:` into runs. Nothing here names a language, model or grid point: all of
them come from the config.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from strae import paths, recipes

# ModelConfig.setting_name() layout (docs/CONTRACTS.md); parsed back to get the training flags of a run directory.
# figure kinds the multi-view workflow draws (workflow/rules/multiview.smk, from its runs' training-curve JSONs), not
# the `figure` rule (scores.csv and measurements)
MULTIVIEW_FIGURE_KINDS = ("training_curve",)
SETTING_PATTERN = re.compile(
    r"^(?P<objective>[a-z]+)_(?P<functions>[a-z]+)_(?P<structure>[a-z]+)_k(?P<k>\d+)_u(?P<u>\d+)$"
)


def setting_name(objective: str, functions: str, structure: str, k: int, u: int) -> str:
    return f"{objective}_{functions}_{structure}_k{int(k)}_u{int(u)}"


def parse_setting(name: str) -> dict[str, Any]:
    match = SETTING_PATTERN.match(name)
    if match is None:
        raise ValueError(f"setting {name!r}: expected {{objective}}_{{functions}}_{{structure}}_k{{k}}_u{{u}}")
    parts: dict[str, Any] = match.groupdict()
    parts["k"], parts["u"] = int(parts["k"]), int(parts["u"])
    return parts


# the papers whose tables are built from the scores of the config's experiments and baselines, each table from its
# own results/scores/<table>.csv (table_eval_targets); the multi-view paper's tables read its own runs
# (workflow/rules/multiview.smk)
SCORE_TABLE_PAPERS = ("selfstrae", "banyan")


@dataclasses.dataclass(frozen=True, order=True)
class Run:
    """One training job: (language, model, setting, seed); `experiment` says which experiment asked first."""

    language: str
    model: str
    setting: str
    seed: int
    experiment: str = dataclasses.field(compare=False, default="")

    @property
    def run_dir(self) -> str:
        return str(paths.run_dir(self.language, self.model, self.setting, self.seed))

    def eval_json(self, variant: str, option: str | None = None) -> str:
        return str(paths.eval_json(self.language, self.model, self.setting, self.seed, variant, option))


def experiment_settings(experiment: dict[str, Any]) -> list[dict[str, Any]]:
    """The settings (objective, functions, structure, k, u) of one experiment, grid first then points, deduplicated."""
    settings: list[dict[str, Any]] = []
    grid = experiment.get("grid")
    if grid:
        for objective, functions, structure, (k, u) in itertools.product(
            grid["objective"], grid["functions"], grid["structure"], grid["ku"]
        ):
            settings.append(dict(objective=objective, functions=functions, structure=structure, k=k, u=u))
    for point in experiment.get("points", []) or []:
        settings.append({key: point[key] for key in ("objective", "functions", "structure", "k", "u")})
    # a point may repeat a grid cell: one setting is one run directory, trained once
    unique: dict[str, dict[str, Any]] = {}
    for setting in settings:
        unique.setdefault(setting_name(**setting), setting)
    return list(unique.values())


def model_runs(config: dict[str, Any], include_disabled: bool = False) -> list[Run]:
    """Every Self-StrAE/Banyan run the enabled experiments ask for (shared runs listed once)."""
    runs: dict[tuple, Run] = {}
    default_seeds = config["scale"]["seeds"]
    for name, experiment in config.get("experiments", {}).items():
        if not include_disabled and not experiment.get("enabled", True):
            continue
        seeds = experiment.get("seeds", default_seeds)
        for language in experiment["languages"]:
            for setting in experiment_settings(experiment):
                for seed in seeds:
                    run = Run(language, experiment["model"], setting_name(**setting), int(seed), name)
                    # experiments share runs (SemEval Table 1 and Banyan Table 1 report the same Self-StrAE seeds):
                    # train each once; the first experiment listing it names it
                    runs.setdefault((run.language, run.model, run.setting, run.seed), run)
    return sorted(runs.values())


def baseline_runs(config: dict[str, Any], baseline: str) -> list[Run]:
    spec = config.get("baselines", {}).get(baseline)
    if not spec or not spec.get("enabled", False):
        return []
    seeds = spec.get("seeds", config["scale"]["seeds"])
    return [Run(lang, baseline, spec["setting"], int(seed), baseline) for lang in spec["languages"] for seed in seeds]


def evaluations(config: dict[str, Any]) -> list[tuple[Run, str | None]]:
    """Every (run, evaluation option) the enabled experiments and baselines ask for: option None is the run's plain
    evaluation, a name an entry of ``baselines.<name>.eval_options`` (evaluated as ``SETTING@OPTION``)."""
    pairs: list[tuple[Run, str | None]] = [(run, None) for run in model_runs(config)]
    for baseline, spec in (config.get("baselines") or {}).items():
        for run in baseline_runs(config, baseline):
            # a baseline without eval_options is evaluated once, as it is ("plain" = no encoder options)
            for option in (spec.get("eval_options") or {"plain": []}):
                pairs.append((run, None if option == "plain" else option))
    return pairs


def eval_setting(run: Run, option: str | None) -> str:
    """The setting a table row names for one evaluation of a run: ``SETTING`` or ``SETTING@OPTION``."""
    return f"{run.setting}@{option}" if option else run.setting


def eval_variants(config: dict[str, Any]) -> list[str]:
    """The evaluation variants every trained model is scored on: ``scale.eval_variants``, default ``[paper]`` (the
    papers' protocol; ``official`` is the other, ``strae evaluate --variant``)."""
    return list((config.get("scale") or {}).get("eval_variants") or ["paper"])


def eval_targets(config: dict[str, Any]) -> list[str]:
    """Every evaluation JSON the enabled experiments and baselines produce (the inputs of scores.csv)."""
    variants = eval_variants(config)
    return [run.eval_json(v, option) for run, option in evaluations(config) for v in variants]


def table_eval_targets(config: dict[str, Any], tables: dict[str, Any], key: str) -> list[str]:
    """The evaluation JSONs table ``key`` of config/tables.yaml reads (its per-table scores file): for each of its
    cells, every enabled run of (language, model, setting) at the cell's variant, all seeds, in
    :func:`eval_targets`' order. A declared but disabled run gives none (the cell reads "not run", as from
    scores.csv), so a table target trains only its own rows' runs."""
    return [run.eval_json(variant, option) for run, option, variant in table_evaluations(config, tables, key)]


def table_evaluations(config: dict[str, Any], tables: dict[str, Any],
                      key: str) -> list[tuple[Run, str | None, str]]:
    """(run, evaluation option, variant) of every evaluation table ``key`` reads: :func:`table_eval_targets`."""
    from strae.report.tables import with_language_entries

    if key not in (tables.get("tables") or {}):
        raise SystemExit(f"config/tables.yaml: no table {key!r}; declared: {sorted(tables.get('tables') or {})}")
    # the columns/rows language blocks add (languages.<lang>.tables.<key>), as `strae report table --config` shows
    table = with_language_entries(tables, key, config)["tables"][key]
    wanted = {(cell["language"], cell["model"], cell["setting"], cell["variant"]) for _, cell in table_cells(table)}
    variants = eval_variants(config)
    return [(run, option, v) for run, option in evaluations(config) for v in variants
            if (run.language, run.model, eval_setting(run, option), v) in wanted]


def _flatten_overrides(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """{lr: {ce: 1e-3}, epochs: 8} -> {"lr.ce": 1e-3, "epochs": 8} (the `strae train --set` keys)."""
    flat: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if key == "lr" and isinstance(value, dict):
            flat.update({f"lr.{objective}": rate for objective, rate in value.items()})
        else:
            flat[key] = value
    return flat


def recipe_overrides(config: dict[str, Any], language: str, model: str, setting: str) -> dict[str, Any]:
    """The recipe overrides of one run: the model's, then its experiments', then `scale.recipe_overrides`.

    Experiments that share a run must agree on their overrides (``check_config`` says which do not); the
    first experiment listing the run supplies them.
    """
    # not "most specific wins": the scale comes last because it is what the machine can afford (the quick CPU
    # profile's one epoch and bf16 losses) and must reach every run, also an experiment's own `epochs: 8`
    merged = _flatten_overrides(config["models"][model].get("recipe_overrides"))
    for experiment in _experiments_with_run(config, language, model, setting)[:1]:
        merged.update(_flatten_overrides(experiment.get("recipe_overrides")))
    merged.update(_flatten_overrides(config["scale"].get("recipe_overrides")))
    return merged


def run_recipe(config: dict[str, Any], run: Run) -> recipes.Recipe | None:
    """The recipe a run trains with (its model's, the config's overrides applied), as `strae train` resolves it from
    the run's flags; None when the config has no preset for the run's model."""
    preset = config["models"].get(run.model)
    if preset is None:
        return None
    overrides = recipe_overrides(config, run.language, run.model, run.setting)
    return recipes.resolve(preset["recipe"], [(key, value, "config") for key, value in overrides.items()]).recipe


def _experiments_with_run(config: dict[str, Any], language: str, model: str, setting: str) -> list[dict[str, Any]]:
    found = []
    for experiment in (config.get("experiments") or {}).values():
        if not experiment.get("enabled", True) or experiment["model"] != model:
            continue
        if language in experiment["languages"] and any(
                setting_name(**s) == setting for s in experiment_settings(experiment)):
            found.append(experiment)
    return found


def _yaml_scalar(value: Any) -> str:
    """A value as `--set` reads it back (YAML flow syntax), quoted for the shell."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    # PyYAML ends a bare scalar document with the "..." end marker; --set would read it as part of the value
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    return "'" + text.replace("'", "'\\''") + "'"


def train_flags(config: dict[str, Any], model: str, setting: str, language: str | None = None) -> str:
    """The `strae train` flags of a run: architecture from the setting name, the model's recipe by name (its values
    come from src/strae/recipes.yaml, exactly as a hand-typed `strae train --model M` gets them) and any recipe
    overrides the config asks for, each as an explicit `--set KEY=VALUE` (recorded in train.json)."""
    # every architecture switch spelled out, even where it equals the preset: the run's command line (recorded in
    # the log) then says what was trained without reading the config
    parts = parse_setting(setting)
    preset = config["models"][model]
    scale = config["scale"]
    flags = [
        f"--model {model}",
        f"--recipe {preset['recipe']}",
        f"--structure {parts['structure']}",
        f"--functions {parts['functions']}",
        f"--objective {parts['objective']}",
        f"--k {parts['k']}",
        f"--u {parts['u']}",
        f"--device {scale.get('device', 'auto')}",
    ]
    # without a language, the experiments sharing the run cannot be found: only model and scale overrides apply
    overrides = (recipe_overrides(config, language, model, setting) if language is not None else
                 {**_flatten_overrides(preset.get("recipe_overrides")),
                  **_flatten_overrides(scale.get("recipe_overrides"))})
    flags += [f"--set {key}={_yaml_scalar(value)}" for key, value in overrides.items()]
    if scale.get("dev_max_sentences"):
        flags.append(f"--dev-max-sentences {scale['dev_max_sentences']}")
    if scale.get("deterministic") is False:  # the default (absent or true) adds nothing: existing runs stay valid
        flags.append("--nondeterministic")
    if scale.get("scatter", "index_add") != "index_add":  # likewise: only a non-default engine choice is spelled
        flags.append(f"--scatter {scale['scatter']}")
    if scale.get("propagation", "auto") != "auto":
        flags.append(f"--propagation {scale['propagation']}")
    return " ".join(flags)


def _registry_names(config: dict[str, Any]) -> set[str] | None:
    """The registry's NAMEs (strae.data.registry.load_registry: validated, parsed once per process)."""
    from strae.data.registry import load_registry, resolve_project_file

    if not resolve_project_file(config["data"]["registry"]).exists():
        return None  # the data layer reports a missing registry itself
    return set(load_registry(config["data"]["registry"]))


def _catalogue(config: dict[str, Any]) -> Any:
    """config/tasks.yaml parsed (None when the file is absent: the evaluation CLI reports that itself)."""
    from strae.evaluate.tasks import load_tasks, tasks_file

    path = Path(tasks_file(config))
    if not path.exists():
        return None

    try:
        return load_tasks(path)
    except SystemExit:
        return None  # reported by `strae evaluate` with the file and entry


def _tables(config: dict[str, Any]) -> dict[str, Any]:
    """report.tables (config/tables.yaml), schema-validated."""
    from strae.report.tables import load_tables

    return load_tables((config.get("report") or {}).get("tables", "config/tables.yaml"))


def _eval_errors(config: dict[str, Any], lang: str, block: dict[str, Any], registry: set[str] | None) -> list[str]:
    """A language block's inline eval sets, the names its `eval.<variant>` lists use, and its `tables:` entries."""
    from strae.evaluate.tasks import inline_set_errors

    errors: list[str] = []
    catalogue = _catalogue(config)
    inline = block.get("eval_sets") or {}
    for name, spec in inline.items():
        where = f"languages.{lang}.eval_sets.{name}"
        errors += inline_set_errors(spec, where)
        if isinstance(spec, dict) and spec.get("path") and not Path(spec["path"]).exists():
            errors.append(f"{where}.path: {spec['path']!r} does not exist")
        if isinstance(spec, dict) and spec.get("registry") and registry is not None \
                and spec["registry"] not in registry:
            errors.append(f"{where}.registry: {spec['registry']!r} is not in {config['data']['registry']}")
        if catalogue is not None and name in catalogue.names():
            errors.append(f"{where}: {name!r} is also a task of {catalogue.source}; rename the inline set "
                          "(one name per evaluation set)")
    listed: set[str] = set()
    for variant, names in (block.get("eval") or {}).items():
        for name in names or []:
            listed.add(name)
            if name in inline and variant == "paper" and (block.get("pretokenize") or "none") != "none":
                # the paper variant embeds its files as they are (the reference's own, already tokenised:
                # strae.evaluate.harness), so a raw inline set there would meet runs trained on pretokenised text
                errors.append(f"languages.{lang}.eval.paper: inline set {name!r} would be embedded without this "
                              f"language's pretokenize ({block['pretokenize']}), which its runs trained with; list "
                              f"it under languages.{lang}.eval.official (embedded as the runs' corpus was) and add "
                              "`official` to scale.eval_variants")
            if name in inline or catalogue is None:
                continue
            declared = [t for t in catalogue if t.name == name and t.variant == variant]
            if not declared:
                errors.append(f"languages.{lang}.eval.{variant}: {name!r} is neither in languages.{lang}.eval_sets "
                              f"nor a {variant} task of {catalogue.source}")
            elif declared[0].language != lang:
                errors.append(f"languages.{lang}.eval.{variant}: task {name!r} of {catalogue.source} is declared "
                              f"for language {declared[0].language!r}")
    tables_path = Path((config.get("report") or {}).get("tables", "config/tables.yaml"))
    declared_tables = _tables(config)["tables"] if tables_path.exists() else None
    for table, name in (block.get("tables") or {}).items():
        if declared_tables is not None and table not in declared_tables:
            errors.append(f"languages.{lang}.tables.{table}: no such table in {tables_path}")
        if name not in listed:
            errors.append(f"languages.{lang}.tables.{table}: {name!r} is not listed in languages.{lang}.eval")
    return errors


def check_config(config: dict[str, Any]) -> list[str]:
    """Checks that need more than one key at a time; each message starts with the offending key path."""
    errors: list[str] = []
    languages = config.get("languages") or {}
    models = config.get("models") or {}
    embedding = config["scale"]["embedding_size"]
    registry = _registry_names(config)
    for lang, block in languages.items():
        sources = list(block.get("corpus") or []) + list(block.get("dev_corpus") or [])
        if not block.get("corpus"):
            errors.append(f"languages.{lang}.corpus: no corpus source; add {{registry|path|url|hf_dataset: ...}}")
        for index, source in enumerate(sources):
            if "path" in source and not Path(source["path"]).exists():
                errors.append(f"languages.{lang}: corpus file {source['path']!r} (source {index}) does not exist")
            if "registry" in source and registry is not None and source["registry"] not in registry:
                errors.append(f"languages.{lang}: corpus registry name {source['registry']!r} is not in "
                              f"{config['data']['registry']}")
            # a url without a checksum could change under the same config; every other source is pinned
            if "url" in source and "sha256" not in source:
                errors.append(f"languages.{lang}: corpus url {source['url']!r} needs a sha256")
        tokenizer = block.get("tokenizer") or {}
        if tokenizer.get("kind") == "bpemb":
            from strae.data.tokenizer import bpemb_spec_errors

            errors += bpemb_spec_errors(tokenizer, f"languages.{lang}.tokenizer")
        elif tokenizer.get("kind") == "sentencepiece":
            # a model file given here would be silently replaced by the one trained on the corpus
            ignored = sorted(set(tokenizer) - {"kind", "vocab_size"})
            if ignored:
                errors.append(f"languages.{lang}.tokenizer: {ignored} describe a pre-trained model file (kind "
                              "bpemb); kind sentencepiece trains its model on the corpus and reads only vocab_size")
        errors += _eval_errors(config, lang, block, registry)
    # resolve each recipe with its overrides now: a typo in a key fails the DAG at parse time, not a training job
    # hours into the run (recipes.yaml itself unreadable: said once, not once per model)
    try:
        recipes.names()
        resolvable = models
    except ValueError as error:
        errors.append(f"recipes: {error}")
        resolvable = {}
    for name, model in resolvable.items():
        recipe = model.get("recipe")
        try:
            recipes.resolve(recipe, [(k, v, f"models.{name}.recipe_overrides")
                                     for k, v in _flatten_overrides(model.get("recipe_overrides")).items()])
        except ValueError as error:
            errors.append(f"models.{name}.recipe: {error}")
    # one run directory can be trained only one way: experiments sharing a run must agree on its overrides
    shared: dict[tuple, tuple[str, dict]] = {}
    for name, experiment in (config.get("experiments") or {}).items():
        if experiment.get("enabled", True) and experiment["model"] in models:
            own = _flatten_overrides(experiment.get("recipe_overrides"))
            for lang in experiment["languages"]:
                for setting in experiment_settings(experiment):
                    key = (lang, experiment["model"], setting_name(**setting))
                    other = shared.setdefault(key, (name, own))
                    if other[1] != own:
                        errors.append(f"experiments.{name}.recipe_overrides: {own} differs from experiments."
                                      f"{other[0]}'s {other[1]} for the shared run {'/'.join(key)}; give one of "
                                      "them another model key or the same overrides")
        if experiment["model"] not in models:
            errors.append(
                f"experiments.{name}.model: unknown model {experiment['model']!r}; known: {sorted(models)}"
            )
        for lang in experiment["languages"]:
            if lang not in languages:
                errors.append(f"experiments.{name}.languages: {lang!r} has no block under `languages:` (no corpus)")
        # the papers compare settings at one embedding size (k channels of size u): a grid point off it would
        # compare unlike models
        for setting in experiment_settings(experiment):
            if setting["k"] * setting["u"] != embedding:
                errors.append(
                    f"experiments.{name}: k*u = {setting['k']}*{setting['u']} = {setting['k'] * setting['u']} "
                    f"!= scale.embedding_size {embedding}"
                )
    evaluated = {r.language for r in model_runs(config)}  # languages whose runs the workflow evaluates
    for name, spec in (config.get("baselines") or {}).items():
        for lang in spec.get("languages", []):
            if lang not in languages:
                errors.append(f"baselines.{name}.languages: {lang!r} has no block under `languages:`")
        if spec.get("init") and spec["init"] not in (config.get("baselines") or {}):
            errors.append(f"baselines.{name}.init: unknown baseline {spec['init']!r}")
        if spec.get("enabled", False):
            evaluated.update(spec.get("languages", []))
            errors += _stopword_errors(config, name, spec)
    for variant in eval_variants(config):
        for lang in sorted(evaluated):
            if lang in languages and not (languages[lang].get("eval") or {}).get(variant):
                errors.append(f"languages.{lang}.eval.{variant}: no tasks listed, but scale.eval_variants has it")
    multiview = config.get("multiview") or {}
    if multiview.get("enabled", False):
        for lang in multiview.get("languages", []):
            for key in ("corpora", "parsers"):
                if lang not in (multiview.get(key) or {}):
                    errors.append(f"multiview.{key}.{lang}: missing; multiview.languages lists {lang!r}, which "
                                  f"needs a {'book-ordered corpus source' if key == 'corpora' else 'spaCy parser'}")
    tables_path = (config.get("report") or {}).get("tables")
    if tables_path and Path(tables_path).exists():
        errors += table_run_errors(config, _tables(config), SCORE_TABLE_PAPERS, tables_path)
    return errors


def _stopword_errors(config: dict[str, Any], name: str, spec: dict[str, Any]) -> list[str]:
    """A baseline evaluation that removes stop-words (``stopwords=remove``) needs a list of each language's own:
    said at DAG time, not by every evaluation job after training."""
    from baselines.glove.encoder import stopword_list_error
    from strae.evaluate.harness import parse_encoder_option

    errors = []
    train = [str(flag) for flag in spec.get("train_options") or []]
    # what the run records (strae train-glove --stopwords-language: a train option after the block's flag wins)
    trained = train[train.index("--stopwords-language") + 1] if "--stopwords-language" in train[:-1] else None
    for option, flags in (spec.get("eval_options") or {}).items():
        try:
            given = dict(parse_encoder_option(str(flag)) for flag in flags or [])  # as the evaluation will read them
        except SystemExit as error:
            errors.append(f"baselines.{name}.eval_options.{option}: {error}")
            continue
        if given.get("stopwords") != "remove":
            continue
        for lang in spec.get("languages", []):
            block = (config.get("languages") or {}).get(lang) or {}
            code = given.get("stopwords_language") or trained or block.get("stopwords_language") or lang
            error = stopword_list_error(code, given.get("stopword_list", "iso"))
            if error:
                errors.append(f"baselines.{name}.eval_options.{option} for language {lang!r} "
                              f"(languages.{lang}.stopwords_language: {code!r}): {error}")
    return errors


def declared_runs(config: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(language, model, eval setting) of every run the config declares, enabled or not: experiments' runs and
    baselines' runs, the latter also as ``SETTING@OPTION`` for each of their evaluation options."""
    declared = {(run.language, run.model, run.setting) for run in model_runs(config, include_disabled=True)}
    for name, spec in (config.get("baselines") or {}).items():
        options = [option for option in (spec.get("eval_options") or {}) if option != "plain"]
        for language in spec.get("languages", []):
            declared.add((language, name, spec["setting"]))
            declared.update((language, name, f"{spec['setting']}@{option}") for option in options)
    return declared


def table_run_errors(config: dict[str, Any], tables: dict[str, Any], papers: Iterable[str],
                     source: str = "config/tables.yaml") -> list[str]:
    """Cells of the `papers`' tables whose run no experiment or baseline of the config declares (enabled or not):
    such a cell could only ever read "not run", so it is a typo in the table or a run missing from the config.
    A run that is declared but disabled (config/quick.yaml turns most experiments off) is a choice, not an error."""
    from strae.report.tables import with_language_entries

    declared = declared_runs(config)
    errors = []
    for key in (tables.get("tables") or {}):
        if key.rpartition("_table")[0] not in papers:
            continue
        # with the columns (and rows) the config's language blocks add: a language asking for a table none of whose
        # runs the config declares for it could only ever read "not run" there too
        table = with_language_entries(tables, key, config)["tables"][key]
        added = {lang for lang, block in (config.get("languages") or {}).items()
                 if key in ((block or {}).get("tables") or {})}
        reported: set[int] = set()
        for index, cell in table_cells(table):
            if (cell["language"], cell["model"], cell["setting"]) in declared:
                continue
            if cell["language"] in added:
                message = (f"languages.{cell['language']}.tables.{key}: no experiment or baseline of the config "
                           f"trains {cell['model']}/{cell['setting']} for {cell['language']!r}, so its cells could "
                           f"only read \"not run\"; add {cell['language']!r} to the `languages` of the experiment "
                           f"that trains {cell['model']}/{cell['setting']}")
                if message not in errors:
                    errors.append(message)
                continue
            if index in reported:
                continue
            row = table["rows"][index]
            errors.append(f"{source}: tables.{key}.rows.{index} ({row['label']}): run {cell['model']}/"
                          f"{cell['setting']} for language {cell['language']!r} is not declared by any "
                          "experiment or baseline of the config, so the row could only read \"not run\"; "
                          "fix the row's setting or add the run to `experiments:`/`baselines:`")
            reported.add(index)  # one message per row: its other cells share the cause
    return errors


def cell_selector(table: dict[str, Any], row: dict[str, Any], column: dict[str, Any]) -> dict[str, Any]:
    """The run a table cell reads: language, model, setting and variant (default ``paper``), the most specific
    declaration winning (a column's value over its row's over the table's). `strae report table` selects
    scores.csv rows with it too, so the workflow's targets and the report agree on every cell."""
    def pick(key: str, default: Any = None) -> Any:
        return next((s[key] for s in (column, row, table) if s.get(key) is not None), default)

    return {"language": pick("language"), "model": pick("model"), "setting": pick("setting"),
            "variant": pick("variant", "paper")}


def other_half(row: dict[str, Any], column: dict[str, Any]) -> bool:
    """A cell of another language's half of the table (a row and a column of different languages): shown as n/a,
    read by nothing (not the cells, not a row's best-seed choice, not the workflow's targets)."""
    return bool(row.get("language") and column.get("language") and row["language"] != column["language"])


def table_cells(table: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row index, :func:`cell_selector`) of every cell of a table that reads a run's scores: not an `external`
    row (a published number), an `unavailable` or `param_count` column, or a cell of another language's half."""
    for index, row in enumerate(table["rows"]):
        if row.get("external"):
            continue
        for column in table["columns"].values():
            if column.get("unavailable") or column.get("param_count"):
                continue
            if other_half(row, column):
                continue
            yield index, cell_selector(table, row, column)


def table_numbers(tables: dict[str, Any], paper: str) -> list[str]:
    """Table numbers declared for one paper in config/tables.yaml (keys `{paper}_table{N}`)."""
    prefix = f"{paper}_table"
    return sorted(key[len(prefix):] for key in tables.get("tables", {}) if key.startswith(prefix))


def runs_matching(runs: Iterable[Run], **selector: Any) -> list[Run]:
    return [run for run in runs if all(getattr(run, key) == value for key, value in selector.items())]


def measurement_runs(runs: Iterable[Run], figure: dict[str, Any]) -> list[Run]:
    """The runs of ``runs`` a model-based figure's measurement reads (its spec in the tables file): those its
    ``runs`` selector matches, of its ``corpus_language`` only (a model is measured on text its own tokenizer
    encoded), of its ``settings`` only where it names them; none for a figure without a selector."""
    selector = dict(figure.get("runs") or {})
    if not selector:
        return []
    if figure.get("corpus_language"):
        selector.setdefault("language", figure["corpus_language"])
    found = runs_matching(runs, **selector)
    if figure.get("settings"):
        found = [run for run in found if run.setting in figure["settings"].values()]
    return found
