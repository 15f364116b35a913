# Contrastive multi-view sentence embeddings (third paper): corpus -> spaCy parse (cached, resumable) -> ctl / cl
# runs -> SentEval-style transfer scores + zero-shot STS scores -> results/multiview/table{1,2}.
# Everything is read from the `multiview:` block of the config; the rules only call `strae <stage>`.
from strae.data.registry import load_registry as _mv_load_registry

MV = config.get("multiview") or {}
MV_ENABLED = bool(MV.get("enabled", False))
MV_TRAIN = MV.get("train") or {}
MV_SENTEVAL = MV.get("senteval") or {}
_MV_REGISTRY = _mv_load_registry(config["data"]["registry"]) if MV_ENABLED else {}


def mv_setting(model):
    """Run-directory setting of a multi-view model (strae train-multiview's default name)."""
    return f"{model}_h{MV_TRAIN.get('hidden', 1000)}_e{MV_TRAIN.get('embedding_dim', 300)}"


def _mv_runs():
    return [(lang, f"multiview_{model}", mv_setting(model), seed)
            for lang in MV.get("languages", []) for model in MV.get("models", []) for seed in MV.get("seeds", [0])]


def _mv_senteval_jsons():
    jsons = [f"results/eval/{lang}/{model}/{setting}/seed{seed}.senteval.json" for lang, model, setting, seed in _mv_runs()]
    for lang in MV.get("languages", []):
        if MV_SENTEVAL.get("random_token", True):
            jsons.append(f"results/eval/{lang}/random-token/dim256/seed0.senteval.json")
        for extra in MV_SENTEVAL.get("extra_runs", []):
            jsons += [f"results/eval/{lang}/{extra['model']}/{extra['setting']}/seed{seed}.senteval.json"
                      for seed in SCALE["seeds"]]
    return jsons


MV_EVAL_JSONS = (_mv_senteval_jsons() + [
    f"results/eval/{lang}/{model}/{setting}/seed{seed}.{variant}.json"
    for lang, model, setting, seed in _mv_runs() for variant in MV.get("sts_variants", ["paper"])
]) if MV_ENABLED else []
MV_TABLE_TARGETS = [f"results/multiview/table{n}.{ext}" for n in (1, 2) for ext in ("csv", "md")] if MV_ENABLED else []


def mv_corpus_file(wildcards):
    spec = MV["corpora"][wildcards.lang]
    if "registry" in spec:
        return f"{RES}/data/{_MV_REGISTRY[spec['registry']].path}"
    return spec["path"]


def mv_corpus_label(wildcards):
    spec = MV["corpora"][wildcards.lang]
    return spec.get("registry") or spec.get("path")


def mv_parser_flags(wildcards):
    parser = MV["parsers"][wildcards.lang]
    flags = [f"--pipeline {parser['pipeline']}"] + [f"--fallback-pipeline {p}" for p in parser.get("fallbacks", [])]
    if parser.get("wheel"):
        entry = _MV_REGISTRY[parser["wheel"]]
        flags += [f"--install-wheel {RES}/data/{entry.path}", f"--wheel-sha256 {entry.sha256}"]
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
    return " ".join(flags)


def mv_senteval_model(wildcards):
    if wildcards.model == "random-token":
        return "random-token"
    return f"results/runs/{wildcards.lang}/{wildcards.model}/{wildcards.setting}/seed{wildcards.seed}"


def mv_senteval_inputs(wildcards):
    if wildcards.model == "random-token":
        return []
    return [f"results/runs/{wildcards.lang}/{wildcards.model}/{wildcards.setting}/seed{wildcards.seed}/train.json"]


def mv_senteval_flags(wildcards):
    flags = [f"--tasks {','.join(MV_SENTEVAL['tasks'])}"] if MV_SENTEVAL.get("tasks") else []
    if MV_SENTEVAL.get("inner_folds"):
        flags.append(f"--inner-folds {MV_SENTEVAL['inner_folds']}")
    return " ".join(flags)


rule multiview_parse:
    output:
        meta=f"{RES}/parses/{{lang}}/meta.json",
    params:
        fetch=mv_fetch_names,
        corpus=mv_corpus_file,
        label=mv_corpus_label,
        flags=mv_parser_flags,
        out_dir=f"{RES}/parses/{{lang}}",
    log:
        "logs/multiview/parse_{lang}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=6 * 60,
    shell:
        "(strae fetch {params.fetch} --resources-dir " + RES + " && OMP_NUM_THREADS={threads} strae parse-corpus "
        "--corpus {params.corpus} --corpus-label {params.label} {params.flags} --out {params.out_dir} --quiet) "
        "> {log} 2>&1"


rule multiview_train:
    input:
        parses=f"{RES}/parses/{{lang}}/meta.json",
    output:
        record="results/runs/{lang}/{model}/{setting}/seed{seed}/train.json",
    wildcard_constraints:
        model="multiview_(ctl|cl)",
    params:
        run_dir=run_dir,
        parses=f"{RES}/parses/{{lang}}",
        flags=mv_train_flags,
        device=DEVICE,
    log:
        "logs/train/{lang}/{model}/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/{model}/{setting}/seed{seed}.tsv"
    threads: MV_TRAIN.get("threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=GPUS_PER_JOB,
        mem_mb=8000,
        runtime=48 * 60,
    shell:
        "OMP_NUM_THREADS={threads} strae train-multiview --parses {params.parses} --lang {wildcards.lang} "
        "--seed {wildcards.seed} {params.flags} --device {params.device} --out {params.run_dir} --record-failure "
        "--quiet > {log} 2>&1"


rule multiview_evaluate_zero_shot:
    # the generic `evaluate` rule only knows the models of `models:`/`baselines:`; same command here
    input:
        record="results/runs/{lang}/{model}/{setting}/seed{seed}/train.json",
    output:
        scores="results/eval/{lang}/{model}/{setting}/seed{seed}.{variant}.json",
    wildcard_constraints:
        model="multiview_(ctl|cl)",
    params:
        run_dir=run_dir,
        tasks=eval_tasks,
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}/seed{seed}.{variant}.log",
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    shell:
        "OMP_NUM_THREADS={threads} strae evaluate --model {params.run_dir} --lang {wildcards.lang} "
        "--variant {wildcards.variant} --tasks {params.tasks} --config {params.config} "
        "--device {params.device} --out {output.scores} --quiet > {log} 2>&1"


rule evaluate_senteval:
    # any encoder: a multi-view run, another strae run (multiview.senteval.extra_runs) or the random-token floor
    input:
        mv_senteval_inputs,
    output:
        scores="results/eval/{lang}/{model}/{setting}/seed{seed}.senteval.json",
    wildcard_constraints:
        model=r"[A-Za-z0-9_\-]+",
    params:
        model=mv_senteval_model,
        flags=mv_senteval_flags,
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}/seed{seed}.senteval.log",
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=8000,
        runtime=4 * 60,
    shell:
        "OMP_NUM_THREADS={threads} strae evaluate --suite senteval --model {params.model} --lang {wildcards.lang} "
        "{params.flags} --config {params.config} --device {params.device} --out {output.scores} --quiet > {log} 2>&1"


rule multiview_scores:
    input:
        MV_EVAL_JSONS,
    output:
        scores="results/multiview/scores.csv",
    log:
        "logs/multiview/aggregate.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae aggregate --out {output.scores} {input} > {log} 2>&1"


rule multiview_table:
    input:
        scores="results/multiview/scores.csv",
        tables=TABLES_FILE,
    output:
        csv="results/multiview/table{n}.csv",
        md="results/multiview/table{n}.md",
    params:
        paper_dir=PAPER_TABLES_DIR,
    log:
        "logs/report/multiview_table{n}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae report table --table multiview_table{wildcards.n} --tables {input.tables} --scores {input.scores} "
        "--paper-dir {params.paper_dir} --out-csv {output.csv} --out-md {output.md} > {log} 2>&1"


rule multiview:
    input:
        MV_TABLE_TARGETS,
