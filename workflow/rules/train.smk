# One job = one (language, model preset, setting, seed) run. The setting name carries the model switches and k/u;
# every other hyper-parameter comes from config (models.<preset>, scale) as explicit flags (strae.plan.train_flags).
# --record-failure: a diverged seed writes train.json with status "failed" and exits 0, so tables report it.
# Interrupting leaves checkpoint.pt (not a declared output, so Snakemake keeps it; SIGTERM writes it after the
# current step): a re-run resumes from it. --restart-stale: a job Snakemake reruns because its settings changed
# (flags, the recipe's values) finds a checkpoint of the old settings, which it discards and starts over.


rule train:
    input:
        unpack(get_tokenized),
        tokenizer=get_tokenizer,
    output:
        record=TRAIN_RECORD_PATTERN,
    # every trainer's rule makes TRAIN_RECORD_PATTERN: the model wildcard picks the one rule for a run directory
    wildcard_constraints:
        model="|".join(sorted(TRAINABLE_MODELS)),
    params:
        flags=get_train_flags,
        # not in the command (the flags name the recipe): an edited recipe trains again, --restart-stale
        # discarding the checkpoint the old recipe wrote (strae train would refuse it)
        recipe=get_train_recipe,
        run_dir=get_run_dir,
        # explicit, not --resources-dir: the trainer reads exactly the files this rule declares as inputs
        data_dir=get_tokenized_dir,
    log:
        "logs/train/{lang}/{model}/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/{model}/{setting}/seed{seed}.tsv"
    # OMP_NUM_THREADS below = threads: torch would otherwise take every core, and concurrent jobs oversubscribe them
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=GPUS_PER_JOB,
        mem_mb=8000,
        runtime=24 * 60,
    # --setting: the directory's name is the label train.json records, whatever ModelConfig.setting_name() says
    shell:
        "OMP_NUM_THREADS={threads} strae train {params.flags} --lang {wildcards.lang} --seed {wildcards.seed} "
        "--setting {wildcards.setting} --data-dir {params.data_dir} --tokenizer {input.tokenizer} "
        "--out {params.run_dir} --record-failure --restart-stale > {log} 2>&1"
