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
        expand(EVAL_SETS_PATTERN, lang=LANGUAGES_WITH_EVAL_SETS),


rule fetch_eval_sets:
    # A language block's inline eval sets (languages.<lang>.eval_sets), placed and checksummed; the manifest lists
    # each file and its sha256. Evaluation fetches them itself too; this rule only lets fetch_all bring them along.
    output:
        manifest=EVAL_SETS_PATTERN,
    params:
        config=EFFECTIVE_CONFIG,
        eval_sets=get_eval_sets_settings,
    log:
        "logs/fetch_eval_sets/{lang}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae fetch --eval-sets {wildcards.lang} --config {params.config} --manifest {output.manifest} > {log} 2>&1"
