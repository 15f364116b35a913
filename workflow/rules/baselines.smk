# Unstructured baselines (Banyan Tables 3-4): GloVe, RoBERTa-medium MLM, RoBERTa + unsupervised SimCSE.
# Same run-directory layout and train.json fields as strae train; enabled per baseline under `baselines:`.
# They train on the language's prepared corpus (the paper's WikiText-103 100M is not in the offline mirror).
import shlex

# each baseline's `train_options`: extra trainer arguments (e.g. RoBERTa's --shape, SimCSE's --recipe)
BASELINE_TRAIN_OPTIONS = {
    name: " ".join(shlex.quote(str(o)) for o in (spec or {}).get("train_options", []))
    for name, spec in config["baselines"].items()
}


rule train_glove:
    # the prepared text, not the tokenised ids: GloVe's default vocabulary is whitespace words (the paper's
    # WikiText-103 words); --tokenization subword would read the language's pieces instead
    input:
        corpus=CORPUS_PATTERNS["train"],
    output:
        record=TRAIN_RECORD_PATTERN,
    wildcard_constraints:
        model="glove",
    params:
        run_dir=get_run_dir,
        epochs=config["baselines"].get("glove", {}).get("epochs", 15),  # Banyan appendix A
        device=DEVICE,
        stopwords=get_stopwords_flag,
        options=BASELINE_TRAIN_OPTIONS.get("glove", ""),
    log:
        "logs/train/{lang}/{model}/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/{model}/{setting}/seed{seed}.tsv"
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=8000,
        runtime=12 * 60,
    shell:
        "strae train-glove --lang {wildcards.lang} --seed {wildcards.seed} --setting {wildcards.setting} "
        "--corpus {input.corpus} --epochs {params.epochs} --device {params.device} {params.stopwords} "
        "{params.options} --threads {threads} --out {params.run_dir} --record-failure > {log} 2>&1"


rule train_roberta:
    # the train split only: MLM pre-training reads no dev data
    input:
        unpack(get_tokenized_train),
        tokenizer=get_tokenizer,
    output:
        record=TRAIN_RECORD_PATTERN,
    wildcard_constraints:
        model="roberta",
    params:
        run_dir=get_run_dir,
        data_dir=get_tokenized_dir,
        steps=config["baselines"].get("roberta", {}).get("max_steps", 200000),  # Banyan appendix A's schedule
        device=DEVICE,
        options=BASELINE_TRAIN_OPTIONS.get("roberta", ""),
    log:
        "logs/train/{lang}/{model}/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/{model}/{setting}/seed{seed}.tsv"
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=GPUS_PER_JOB,
        mem_mb=16000,
        runtime=48 * 60,
    shell:
        "strae train-roberta --lang {wildcards.lang} --seed {wildcards.seed} --setting {wildcards.setting} "
        "--data-dir {params.data_dir} --tokenizer {input.tokenizer} --steps {params.steps} "
        "--device {params.device} {params.options} --threads {threads} --out {params.run_dir} --record-failure "
        "> {log} 2>&1"


rule train_simcse:
    # the RoBERTa run's train.json: SimCSE continues that run and reads its tokenizer and corpus from it; and the
    # language's evaluation files, which hold the STS-B dev set its checkpoint selection reads (placed under
    # data.resources_dir, so training runs offline: strae.data.fetch.training_dev_sets)
    input:
        init=get_baseline_init_run,
        dev_sets=get_evaluation_files,
    output:
        record=TRAIN_RECORD_PATTERN,
    wildcard_constraints:
        model="roberta_simcse",
    params:
        run_dir=get_run_dir,
        init_dir=get_baseline_init_dir,
        steps=get_simcse_steps_flag,  # empty: SimCSE's own length, one epoch over (at most) 10^6 sentences
        resources_dir=RES,
        device=DEVICE,
        options=BASELINE_TRAIN_OPTIONS.get("roberta_simcse", ""),
    log:
        "logs/train/{lang}/{model}/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/{model}/{setting}/seed{seed}.tsv"
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=GPUS_PER_JOB,
        mem_mb=16000,
        runtime=12 * 60,
    shell:
        "strae train-simcse --init {params.init_dir} --seed {wildcards.seed} --setting {wildcards.setting} "
        "--resources-dir {params.resources_dir} "
        "{params.steps} --device {params.device} {params.options} --threads {threads} --out {params.run_dir} "
        "--record-failure "
        "> {log} 2>&1"
