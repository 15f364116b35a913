# Corpus preparation: fetch (resources -> mirror -> upstream, sha256-checked), segment, subsample, split off dev.
# Everything about a language (its sources, dev corpus, token budget) is read from the effective config.


rule prepare_corpus:
    # no inputs: the command fetches its sources itself (resources -> mirror -> upstream, checksummed), which are
    # not files a rule could make; the `settings` param re-runs it when the language's sources change
    output:
        **CORPUS_PATTERNS,
        meta=CORPUS_META_PATTERN,
    params:
        settings=get_preparation_settings,
        config=EFFECTIVE_CONFIG,
        out_dir=get_corpus_dir,
    log:
        "logs/prepare_corpus/{lang}.log",
    benchmark:
        "benchmarks/out/prepare_corpus/{lang}.tsv"
    threads: 1
    conda:
        "../envs/strae.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "strae prepare-corpus --lang {wildcards.lang} --config {params.config} --out-dir {params.out_dir} > {log} 2>&1"


rule fetch_all:
    # For air-gapped clusters: run on a machine with internet, then copy resources/ over.
    input:
        expand(CORPUS_PATTERNS["train"], lang=sorted(config["languages"])),
        expand(TOKENIZER_PATTERN, lang=sorted(config["languages"])),
        FETCHED_MANIFESTS,


rule fetch_language_files:
    # What a language's runs read besides corpus and tokenizer, in parts (strae.data.fetch.FILE_PARTS): `evaluation`,
    # its evaluation sets for the variants the workflow scores (inline ones too; an input of every evaluation of the
    # language, so evaluation runs offline); `multiview`, where the multi-view paper runs it, its book corpus, parser
    # wheel and SentEval transfer files; `probing`, SentEval's probing files (its Table 2). Placed and checksummed
    # (resources -> mirror -> upstream); the manifest lists each file and its sha256.
    output:
        manifest=LANGUAGE_FILES_PATTERN,
    wildcard_constraints:
        part="evaluation|multiview|probing",
    params:
        config=EFFECTIVE_CONFIG,
        files=get_language_files,
    log:
        "logs/fetch_language_files/{lang}.{part}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae fetch --language {wildcards.lang} --part {wildcards.part} --config {params.config} "
        "--manifest {output.manifest} > {log} 2>&1"
