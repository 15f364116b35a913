# Contrastive multi-view sentence embeddings (third paper): corpus -> spaCy parse (cached, resumable) -> ctl / cl
# runs -> SentEval-style transfer scores + zero-shot STS scores -> results/multiview/table{1,2}.
# Definitions in multiview_common.smk; the rules only call `strae <stage>`.

rule multiview_parse:
    # meta.json (written last by parse-corpus) is the output: the shards before it are a resumable cache, so an
    # interrupted parse continues instead of starting over
    output:
        meta=MV_PARSES_PATTERN,
    params:
        fetch=mv_fetch_names,
        corpus=mv_corpus_file,
        label=mv_corpus_label,
        flags=mv_parser_flags,
        out_dir=mv_parses_dir,
        resources_dir=mv_resources_dir,
    log:
        f"logs/multiview/parse_{{lang}}_{MV_PARSE_NAME}.log",
    benchmark:
        f"benchmarks/out/multiview/parse_{{lang}}_{MV_PARSE_NAME}.tsv"
    threads: 1
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=6 * 60,
    shell:
        "(strae fetch {params.fetch} --resources-dir {params.resources_dir} && OMP_NUM_THREADS={threads} strae parse-corpus "
        "--corpus {params.corpus} --corpus-label {params.label} {params.flags} --out {params.out_dir} --quiet) "
        "> {log} 2>&1"


rule multiview_train:
    input:
        parses=MV_PARSES_PATTERN,
    output:
        record=TRAIN_RECORD_PATTERN,
    wildcard_constraints:
        model="multiview_(ctl|cl)",
    params:
        run_dir=get_run_dir,
        parses=mv_parses_dir,
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
        record=TRAIN_RECORD_PATTERN,
        files=get_evaluation_files,
    output:
        scores=str(paths.eval_json("{lang}", "{model}", "{setting}", "{seed}", "{variant}")),
    wildcard_constraints:
        model="multiview_(ctl|cl)",
    params:
        run_dir=get_run_dir,
        tasks=get_eval_tasks,
        task_specs=get_eval_task_specs,  # as the evaluate rule's: a changed task or inline set scores again
        eval_sets=get_eval_sets_settings,
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}/seed{seed}.{variant}.log",
    benchmark:
        "benchmarks/out/evaluate/{lang}/{model}/{setting}/seed{seed}.{variant}.tsv"
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    shell:
        f"{OFFLINE} "
        "OMP_NUM_THREADS={threads} strae evaluate --model {params.run_dir} --lang {wildcards.lang} "
        "--variant {wildcards.variant} --tasks {params.tasks} --config {params.config} "
        "--device {params.device} --out {output.scores} --quiet > {log} 2>&1"


rule evaluate_senteval:
    # any encoder: a multi-view run, another strae run (multiview.senteval.extra_runs) or the random-token floor;
    # suite senteval = the transfer tasks (Table 1), probing = SentEval's probing tasks (Table 2), one JSON each
    input:
        mv_senteval_inputs,
        files=get_senteval_files,
    output:
        scores=str(paths.eval_json("{lang}", "{model}", "{setting}", "{seed}", "{suite}")),
    wildcard_constraints:
        model=r"[A-Za-z0-9_\-]+",
        suite="senteval|probing",
    params:
        model=mv_senteval_model,
        flags=mv_senteval_flags,
        settings=mv_senteval_settings,  # not in the command: what the CLI reads from the config's senteval block
        task_specs=mv_senteval_task_specs,  # not in the command: the tasks' definitions in config/tasks.yaml
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}/seed{seed}.{suite}.log",
    benchmark:
        "benchmarks/out/evaluate/{lang}/{model}/{setting}/seed{seed}.{suite}.tsv"
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=mv_senteval_mem_mb,
        runtime=mv_senteval_runtime,
    shell:
        f"{OFFLINE} "
        "OMP_NUM_THREADS={threads} strae evaluate --suite senteval --variant {wildcards.suite} --model {params.model} "
        "--lang {wildcards.lang} {params.flags} --config {params.config} --device {params.device} "
        "--out {output.scores} --quiet > {log} 2>&1"


rule multiview_scores:
    input:
        MV_EVAL_JSONS,
    output:
        scores=MV_SCORES,
    log:
        "logs/multiview/aggregate.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae aggregate --out {output.scores} {input} > {log} 2>&1"


rule multiview_table:
    input:
        scores=MV_SCORES,
        tables=TABLES_FILE,
    output:
        csv=str(paths.table_path("multiview/", "{n}", "csv")),
        md=str(paths.table_path("multiview/", "{n}", "md")),
    params:
        paper_dir=PAPER_TABLES_DIR,
        config=EFFECTIVE_CONFIG,
    log:
        "logs/report/multiview_table{n}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae report table --table multiview_table{wildcards.n} --tables {input.tables} --scores {input.scores} "
        "--paper-dir {params.paper_dir} --config {params.config} --out-csv {output.csv} --out-md {output.md} "
        "> {log} 2>&1"


rule multiview_curve:
    # the paper's Figure 2: every point a run kept (multiview.curve; strae train-multiview --curve-every) scored on
    # the curve's SentEval tasks, one curve JSON
    input:
        record=TRAIN_RECORD_PATTERN,
        files=mv_curve_files,
    output:
        curve=str(paths.curve_json("{lang}", "{model}", "{setting}", "{seed}")),
    wildcard_constraints:
        model="multiview_(ctl|cl)",
    params:
        run_dir=get_run_dir,
        flags=mv_curve_flags,
        settings=mv_senteval_settings,  # not in the command: what the CLI reads from the config's senteval block
        task_specs=mv_curve_task_specs,  # not in the command: the tasks' definitions in config/tasks.yaml
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}/seed{seed}.curve.log",
    benchmark:
        "benchmarks/out/evaluate/{lang}/{model}/{setting}/seed{seed}.curve.tsv"
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=8000,
        runtime=12 * 60,
    shell:
        f"{OFFLINE} "
        "OMP_NUM_THREADS={threads} strae evaluate --suite senteval --curve --model {params.run_dir} "
        "--lang {wildcards.lang} {params.flags} --config {params.config} --device {params.device} "
        "--out {output.curve} --quiet > {log} 2>&1"


rule multiview_figure:
    # the multi-view paper's figures (config/tables.yaml figures of a multi-view kind) from the curve JSONs
    input:
        curves=MV_CURVE_JSONS,
        tables=TABLES_FILE,
    output:
        png=str(paths.multiview_figure_file("{mv_figure}", "png")),
        pdf=str(paths.multiview_figure_file("{mv_figure}", "pdf")),
    wildcard_constraints:
        mv_figure="|".join(MV_FIGURES) or "none",
    params:
        paper_dir=PAPER_TABLES_DIR,
        config=EFFECTIVE_CONFIG,
    log:
        "logs/report/figure_{mv_figure}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae figure {wildcards.mv_figure} --tables {input.tables} --config {params.config} --curves {input.curves} "
        "--paper-dir {params.paper_dir} --out-png {output.png} --out-pdf {output.pdf} > {log} 2>&1"


rule multiview:
    input:
        MV_TABLE_TARGETS,
        MV_FIGURE_TARGETS,
