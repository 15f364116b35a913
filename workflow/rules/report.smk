# The papers' tables and figures, built only from results/scores.csv (+ paper_tables/ and, for parameter counts,
# the models themselves). Which run and task fills each paper cell is declared in config/tables.yaml.


rule param_counts:
    output:
        counts="results/param_counts.csv",
    params:
        config=EFFECTIVE_CONFIG,
    log:
        "logs/report/param_counts.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae report param-counts --config {params.config} --out {output.counts} > {log} 2>&1"


rule selfstrae_table:
    input:
        scores="results/scores.csv",
        counts="results/param_counts.csv",
        tables=TABLES_FILE,
        paper=selfstrae_paper_table,
    output:
        # report(): `snakemake --report report.html` shows every table and figure (workflow/report/*.rst captions)
        csv=report("results/table{n}.csv", caption="../report/table.rst", category="Tables",
                   subcategory="Self-StrAE (SemEval 2024)", labels={"paper": "Self-StrAE", "table": "{n}", "file": "csv"}),
        md=report("results/table{n}.md", caption="../report/table.rst", category="Tables",
                  subcategory="Self-StrAE (SemEval 2024)", labels={"paper": "Self-StrAE", "table": "{n}", "file": "md"}),
    params:
        paper_dir=PAPER_TABLES_DIR,
        config=EFFECTIVE_CONFIG,
        languages=selfstrae_table_languages,
    log:
        "logs/report/selfstrae_table{n}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae report table --table selfstrae_table{wildcards.n} --tables {input.tables} --scores {input.scores} "
        "--config {params.config} "
        "--param-counts {input.counts} --paper-dir {params.paper_dir} --out-csv {output.csv} --out-md {output.md} "
        "> {log} 2>&1"


rule banyan_table:
    input:
        scores="results/scores.csv",
        counts="results/param_counts.csv",
        tables=TABLES_FILE,
        paper=banyan_paper_table,
    output:
        csv=report("results/banyan/table{n}.csv", caption="../report/table.rst", category="Tables",
                   subcategory="Banyan", labels={"paper": "Banyan", "table": "{n}", "file": "csv"}),
        md=report("results/banyan/table{n}.md", caption="../report/table.rst", category="Tables",
                  subcategory="Banyan", labels={"paper": "Banyan", "table": "{n}", "file": "md"}),
    params:
        paper_dir=PAPER_TABLES_DIR,
        config=EFFECTIVE_CONFIG,
        languages=banyan_table_languages,
    log:
        "logs/report/banyan_table{n}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae report table --table banyan_table{wildcards.n} --tables {input.tables} --scores {input.scores} "
        "--config {params.config} "
        "--param-counts {input.counts} --paper-dir {params.paper_dir} --out-csv {output.csv} --out-md {output.md} "
        "> {log} 2>&1"


rule tables:
    input:
        TABLE_TARGETS,


rule figure:
    input:
        tables=TABLES_FILE,
        scores=figure_scores,
        runs=figure_runs,
        tokenized=figure_tokenized,
    output:
        png=report("results/figures/{figure}.png", caption="../report/figure.rst", category="Figures",
                   labels={"figure": "{figure}", "file": "png"}),
        pdf="results/figures/{figure}.pdf",
    params:
        config=EFFECTIVE_CONFIG,
    log:
        "logs/report/figure_{figure}.log",
    threads: 1
    conda:
        "../envs/strae.yaml"
    shell:
        "strae figure {wildcards.figure} --tables {input.tables} --config {params.config} "
        "--scores {input.scores} --runs {input.runs} --corpus {input.tokenized} --out-png {output.png} --out-pdf {output.pdf} > {log} 2>&1"


rule figures:
    input:
        FIGURE_TARGETS,
