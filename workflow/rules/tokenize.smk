# Tokenizers (BPEmb model file, or SentencePiece BPE trained on the corpus) and the tokenised corpus (ids + offsets).


rule tokenizer:
    input:
        unpack(get_tokenizer_inputs),
    output:
        model=TOKENIZER_PATTERN,
    params:
        # not used by the command (it reads the effective config): a param so that editing the language's data
        # settings re-runs the job (Snakemake's params rerun trigger)
        settings=get_corpus_settings,
        config=EFFECTIVE_CONFIG,
        corpus=get_tokenizer_corpus_flag,
    log:
        "logs/tokenizer/{lang}.log",
    benchmark:
        "benchmarks/out/tokenizer/{lang}.tsv"
    # SentencePiece trains with 2 threads whatever the job is given (train_sentencepiece's threads=2, fixed so that
    # a tokenizer trained again is the one the records used): the job reserves them
    threads: 2
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
        unpack(get_corpus),
        tokenizer=get_tokenizer,
    output:
        **TOKENIZED_PATTERNS,
    params:
        settings=get_corpus_settings,
        config=EFFECTIVE_CONFIG,
        corpus_dir=get_corpus_dir,
        out_dir=get_tokenized_dir,
    log:
        "logs/tokenize_corpus/{lang}.log",
    benchmark:
        "benchmarks/out/tokenize_corpus/{lang}.tsv"
    threads: 1
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "strae tokenize-corpus --lang {wildcards.lang} --config {params.config} --corpus-dir {params.corpus_dir} "
        "--tokenizer {input.tokenizer} --out-dir {params.out_dir} > {log} 2>&1"
