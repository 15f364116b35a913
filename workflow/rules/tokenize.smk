# Tokenizers (BPEmb model file, or SentencePiece BPE trained on the corpus) and the tokenised corpus (ids + offsets).


rule tokenizer:
    input:
        unpack(tokenizer_inputs),
    output:
        model=f"{RES}/tokenizers/{{lang}}.model",
    params:
        config=EFFECTIVE_CONFIG,
        corpus_dir=f"{RES}/corpora/{{lang}}",
    log:
        "logs/tokenizer/{lang}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "strae tokenizer --lang {wildcards.lang} --config {params.config} --corpus-dir {params.corpus_dir} "
        "--out {output.model} > {log} 2>&1"


rule tokenize_corpus:
    input:
        corpus=f"{RES}/corpora/{{lang}}/{{split}}.txt",
        tokenizer=f"{RES}/tokenizers/{{lang}}.model",
    output:
        ids=f"{RES}/tokenized/{{lang}}/{{split}}.ids.npy",
        offsets=f"{RES}/tokenized/{{lang}}/{{split}}.offsets.npy",
        meta=f"{RES}/tokenized/{{lang}}/{{split}}.json",
    params:
        config=EFFECTIVE_CONFIG,
        out_dir=f"{RES}/tokenized/{{lang}}",
    log:
        "logs/tokenize_corpus/{lang}.{split}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "strae tokenize-corpus --lang {wildcards.lang} --config {params.config} --split {wildcards.split} "
        "--corpus {input.corpus} --tokenizer {input.tokenizer} --out-dir {params.out_dir} > {log} 2>&1"
