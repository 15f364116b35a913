# Tokenizers (BPEmb model file, or SentencePiece BPE trained on the corpus) and the tokenised corpus (ids + offsets).


rule tokenizer:
    input:
        unpack(tokenizer_inputs),
    output:
        model=f"{RES}/tokenizers/{{lang}}.model",
    params:
        settings=corpus_settings,
        config=EFFECTIVE_CONFIG,
        corpus=tokenizer_corpus_flag,
    log:
        "logs/tokenizer/{lang}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "strae tokenizer --lang {wildcards.lang} --config {params.config} {params.corpus} "
        "--out {output.model} > {log} 2>&1"


rule tokenize_corpus:
    # Both splits in one job: they share the tokenizer load and the length filter.
    input:
        train=f"{RES}/corpora/{{lang}}/train.txt",
        dev=f"{RES}/corpora/{{lang}}/dev.txt",
        tokenizer=f"{RES}/tokenizers/{{lang}}.model",
    output:
        train_ids=f"{RES}/tokenized/{{lang}}/train.ids.npy",
        train_offsets=f"{RES}/tokenized/{{lang}}/train.offsets.npy",
        train_meta=f"{RES}/tokenized/{{lang}}/train.json",
        dev_ids=f"{RES}/tokenized/{{lang}}/dev.ids.npy",
        dev_offsets=f"{RES}/tokenized/{{lang}}/dev.offsets.npy",
        dev_meta=f"{RES}/tokenized/{{lang}}/dev.json",
    params:
        settings=corpus_settings,
        config=EFFECTIVE_CONFIG,
        corpus_dir=corpus_dir,
        out_dir=f"{RES}/tokenized/{{lang}}",
    log:
        "logs/tokenize_corpus/{lang}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "strae tokenize-corpus --lang {wildcards.lang} --config {params.config} --corpus-dir {params.corpus_dir} "
        "--tokenizer {input.tokenizer} --out-dir {params.out_dir} > {log} 2>&1"
