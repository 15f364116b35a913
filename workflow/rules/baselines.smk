# Unstructured baselines (Banyan Tables 3-4): GloVe, RoBERTa-medium MLM, RoBERTa + unsupervised SimCSE.
# Same run-directory layout and train.json fields as strae train; enabled per baseline under `baselines:`.
# They train on the language's prepared corpus (the paper's WikiText-103 100M is not in the offline mirror).


rule train_glove:
    input:
        train_ids=f"{RES}/tokenized/{{lang}}/train.ids.npy",
        corpus=f"{RES}/corpora/{{lang}}/train.txt",
        tokenizer=f"{RES}/tokenizers/{{lang}}.model",
    output:
        record="results/runs/{lang}/glove/{setting}/seed{seed}/train.json",
    params:
        run_dir="results/runs/{lang}/glove/{setting}/seed{seed}",
        data_dir=tokenized_dir,
        epochs=config["baselines"].get("glove", {}).get("epochs", 15),
        device=SCALE.get("device", "auto"),
    log:
        "logs/train/{lang}/glove/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/glove/{setting}/seed{seed}.tsv"
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=0 if SCALE.get("device", "auto") == "cpu" else 1,
        mem_mb=8000,
        runtime=12 * 60,
    shell:
        "OMP_NUM_THREADS={threads} strae train-glove --lang {wildcards.lang} --seed {wildcards.seed} "
        "--corpus {input.corpus} --data-dir {params.data_dir} --tokenizer {input.tokenizer} "
        "--epochs {params.epochs} --device {params.device} --out {params.run_dir} --record-failure > {log} 2>&1"


rule train_roberta:
    input:
        train_ids=f"{RES}/tokenized/{{lang}}/train.ids.npy",
        corpus=f"{RES}/corpora/{{lang}}/train.txt",
        tokenizer=f"{RES}/tokenizers/{{lang}}.model",
    output:
        record="results/runs/{lang}/roberta/{setting}/seed{seed}/train.json",
    params:
        run_dir="results/runs/{lang}/roberta/{setting}/seed{seed}",
        data_dir=tokenized_dir,
        max_steps=config["baselines"].get("roberta", {}).get("max_steps", 200000),
        device=SCALE.get("device", "auto"),
    log:
        "logs/train/{lang}/roberta/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/roberta/{setting}/seed{seed}.tsv"
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=0 if SCALE.get("device", "auto") == "cpu" else 1,
        mem_mb=16000,
        runtime=48 * 60,
    shell:
        "OMP_NUM_THREADS={threads} strae train-roberta --lang {wildcards.lang} --seed {wildcards.seed} "
        "--corpus {input.corpus} --data-dir {params.data_dir} --tokenizer {input.tokenizer} "
        "--max-steps {params.max_steps} --device {params.device} --out {params.run_dir} --record-failure > {log} 2>&1"


rule train_simcse:
    input:
        init=baseline_init_run,
        corpus=f"{RES}/corpora/{{lang}}/train.txt",
    output:
        record="results/runs/{lang}/roberta_simcse/{setting}/seed{seed}/train.json",
    params:
        run_dir="results/runs/{lang}/roberta_simcse/{setting}/seed{seed}",
        init_dir=baseline_init_dir,
        max_steps=config["baselines"].get("roberta_simcse", {}).get("max_steps", 0),
        device=SCALE.get("device", "auto"),
    log:
        "logs/train/{lang}/roberta_simcse/{setting}/seed{seed}.log",
    benchmark:
        "benchmarks/out/train/{lang}/roberta_simcse/{setting}/seed{seed}.tsv"
    threads: SCALE.get("train_threads", 2)
    conda:
        "../envs/strae.yaml"
    resources:
        gpu=0 if SCALE.get("device", "auto") == "cpu" else 1,
        mem_mb=16000,
        runtime=12 * 60,
    shell:
        "OMP_NUM_THREADS={threads} strae train-simcse --lang {wildcards.lang} --seed {wildcards.seed} "
        "--init {params.init_dir} --corpus {input.corpus} --max-steps {params.max_steps} "
        "--device {params.device} --out {params.run_dir} --record-failure > {log} 2>&1"
