# Zero-shot evaluation: one job per (run, variant); the language's task list per variant comes from config.
# A failed run is evaluated too: strae evaluate writes tasks {} with run.status "failed", so the tables count it.


rule evaluate:
    # priority: score a run as soon as it is trained, so partial results exist while the grid trains
    priority: 10
    input:
        record="results/runs/{lang}/{model}/{setting}/seed{seed}/train.json",
    output:
        scores="results/eval/{lang}/{model}/{setting}/seed{seed}.{variant}.json",
    params:
        run_dir=run_dir,
        tasks=eval_tasks,
        eval_sets=eval_sets_settings,
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}/seed{seed}.{variant}.log",
    benchmark:
        "benchmarks/out/evaluate/{lang}/{model}/{setting}/seed{seed}.{variant}.tsv"
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "OMP_NUM_THREADS={threads} strae evaluate --model {params.run_dir} --lang {wildcards.lang} "
        "--variant {wildcards.variant} --tasks {params.tasks} --config {params.config} "
        "--device {params.device} --out {output.scores} > {log} 2>&1"


rule evaluate_with_options:
    # Baseline evaluation variants (e.g. GloVe + stop-word removal): baselines.<name>.eval_options.<option>.
    priority: 10
    input:
        record="results/runs/{lang}/{model}/{setting}/seed{seed}/train.json",
    output:
        scores="results/eval/{lang}/{model}/{setting}@{option}/seed{seed}.{variant}.json",
    wildcard_constraints:
        model="|".join(sorted(BASELINE_MODELS)) or "none",
    params:
        run_dir=run_dir,
        tasks=eval_tasks,
        eval_sets=eval_sets_settings,
        options=encoder_options,
        config=EFFECTIVE_CONFIG,
        device=DEVICE,
    log:
        "logs/evaluate/{lang}/{model}/{setting}@{option}/seed{seed}.{variant}.log",
    benchmark:
        "benchmarks/out/evaluate/{lang}/{model}/{setting}@{option}/seed{seed}.{variant}.tsv"
    threads: SCALE.get("eval_threads", 1)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "OMP_NUM_THREADS={threads} strae evaluate --model {params.run_dir} --lang {wildcards.lang} "
        "--variant {wildcards.variant} --tasks {params.tasks} {params.options} --config {params.config} "
        "--device {params.device} --out {output.scores} > {log} 2>&1"


rule aggregate:
    input:
        EVAL_TARGETS,
    output:
        scores="results/scores.csv",
    log:
        "logs/aggregate.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae aggregate --out {output.scores} {input} > {log} 2>&1"
