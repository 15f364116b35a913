# Zero-shot evaluation: one job per (run, variant[, option]); the language's task list per variant comes from config.
# A failed run is evaluated too: strae evaluate writes tasks {} with run.status "failed", so the tables count it.


rule evaluate:
    # `{option}` is empty, or `@OPTION` for a baseline's evaluation option (e.g. GloVe + stop-word removal:
    # baselines.<name>.eval_options.<OPTION>, results/eval/.../SETTING@OPTION/...)
    # priority: score a run as soon as it is trained, so partial results exist while the grid trains
    priority: 10
    # train.json, not encoder.json or the weights: a failed run has only train.json and is evaluated all the same
    input:
        record=TRAIN_RECORD_PATTERN,
        files=get_evaluation_files,
    output:
        scores=EVAL_PATTERN,
    params:
        run_dir=get_run_dir,
        tasks=get_eval_tasks,
        task_specs=get_eval_task_specs,  # not in the command: a changed task definition scores again
        eval_sets=get_eval_sets_settings,
        options=get_encoder_options,
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}{option}/seed{seed}.{variant}.log",
    benchmark:
        "benchmarks/out/evaluate/{lang}/{model}/{setting}{option}/seed{seed}.{variant}.tsv"
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        f"{OFFLINE} "
        "OMP_NUM_THREADS={threads} strae evaluate --model {params.run_dir} --lang {wildcards.lang} "
        "--variant {wildcards.variant} --tasks {params.tasks} {params.options} --config {params.config} "
        "--device {params.device} --out {output.scores} > {log} 2>&1"


rule aggregate:
    # every planned evaluation, failed runs' included: scores.csv then has a row for each run the config asks for
    input:
        EVAL_TARGETS,
    output:
        scores=SCORES,
    log:
        "logs/aggregate.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae aggregate --out {output.scores} {input} > {log} 2>&1"


rule aggregate_table:
    # one table's evaluations only (strae.plan.table_eval_targets): `snakemake results/table2.csv` trains and
    # evaluates the runs that table reads, not every run scores.csv collects. No input when all of the table's runs
    # are disabled (config/quick.yaml): a header-only CSV, the cells "not run"
    input:
        get_table_eval_targets,
    output:
        scores=TABLE_SCORES_PATTERN,
    log:
        "logs/aggregate/{table}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae aggregate --out {output.scores} {input} > {log} 2>&1"
