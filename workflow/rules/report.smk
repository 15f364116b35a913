# The papers' tables and figures, built only from scores (a table from its own results/scores/<table>.csv, figures
# from results/scores.csv), paper_tables/ and measurements
# (results/measure/*.json: parameter counts, node counts, geometry). Which run and task fills each paper cell is
# declared in config/tables.yaml; `strae measure` is the only report step that loads models.


rule measure:
    # `param_counts`: every configured setting's model built, its non-embedding parameters counted;
    # a model-based figure's name: the runs and corpus it declares in config/tables.yaml, measured on DEVICE
    # the tables file as a param, not an input: a label edited there re-runs no measurement; what a measurement
    # reads of it (its figure's spec) and of the config's report block is the `settings` param
    input:
        runs=get_measure_runs,
        tokenized=get_measure_tokenized,
    output:
        measurement=MEASUREMENT_PATTERN,
    params:
        config=EFFECTIVE_CONFIG,
        corpus=get_measure_corpus_flag,
        device=DEVICE,
        tables=TABLES_FILE,
        settings=get_measure_settings,  # not in the command
        counted=get_counted_settings,  # not in the command: a setting added to the config counts again
    log:
        "logs/measure/{measurement}.log",
    benchmark:
        "benchmarks/out/measure/{measurement}.tsv"
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae measure {wildcards.measurement} --tables {params.tables} --config {params.config} --runs {input.runs} "
        "{params.corpus} --device {params.device} --out {output.measurement} > {log} 2>&1"


rule table:
    # results/table{n} (Self-StrAE, SemEval 2024) and results/banyan/table{n}: config/tables.yaml <paper>_table<n>
    # the declarations and the transcribed paper numbers are inputs too: editing either rebuilds the table.
    # Its scores are its own (results/scores/<key>.csv): a table target trains only the runs its cells read
    input:
        scores=get_table_scores,
        counts=PARAM_COUNTS,
        tables=TABLES_FILE,
        paper=get_paper_table,
    output:
        # report(): `snakemake --report report.html` shows every table and figure (workflow/report/*.rst captions)
        csv=report(TABLE_PATTERNS["csv"], caption="../report/table.rst", category="Tables",
                   subcategory=get_table_report_subcategory, labels=table_report_labels("csv")),
        md=report(TABLE_PATTERNS["md"], caption="../report/table.rst", category="Tables",
                  subcategory=get_table_report_subcategory, labels=table_report_labels("md")),
    params:
        table=get_table_key,
        paper_dir=PAPER_TABLES_DIR,
        config=EFFECTIVE_CONFIG,
        languages=get_table_languages,
    log:
        "logs/report/{table_dir}table{n}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae report table --table {params.table} --tables {input.tables} --scores {input.scores} "
        "--config {params.config} "
        "--param-counts {input.counts} --paper-dir {params.paper_dir} --out-csv {output.csv} --out-md {output.md} "
        "> {log} 2>&1"


rule tables:
    input:
        TABLE_TARGETS,


rule figure:
    input:
        tables=TABLES_FILE,
        scores=get_figure_scores,
        measurement=get_figure_measurement,
    output:
        png=report(FIGURE_PATTERNS["png"], caption="../report/figure.rst", category="Figures",
                   labels={"figure": "{figure}", "file": "png"}),
        pdf=FIGURE_PATTERNS["pdf"],
    params:
        config=EFFECTIVE_CONFIG,
    log:
        "logs/report/figure_{figure}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae figure {wildcards.figure} --tables {input.tables} --config {params.config} "
        "--scores {input.scores} --measurement {input.measurement} --out-png {output.png} --out-pdf {output.pdf} "
        "> {log} 2>&1"


rule figures:
    input:
        FIGURE_TARGETS,
