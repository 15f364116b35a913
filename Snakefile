# strae: corpus -> tokenizer -> model x setting x seed -> evaluation -> scores.csv -> the papers' tables and figures.
#   snakemake --cores 8 results/table2.csv                                  (paper scale, config/config.yaml)
#   snakemake --cores 2 results/table2.csv --configfile config/quick.yaml   (small CPU run, same DAG; targets first)
# Everything users change lives in config/config.yaml (validated against workflow/schemas/config.schema.yaml).
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from strae.schemas import SheetError, validate
from strae.yamlio import read_config_file

min_version("9.0")


configfile: "config/config.yaml"


# strae's own check (as every `strae` command's): each offending key on one line, not Snakemake's schema dump
try:
    # workflow.configfiles lists the --configfile overlays first, then this file's configfile: base first here
    _files = [str(f) for f in workflow.configfiles[-1:] + workflow.configfiles[:-1]]
    _overlays = f" overlaid by {', '.join(_files[1:])}" if _files[1:] else ""
    for _file in _files:  # Snakemake reads them (JSON, else YAML) letting a key given twice replace the first
        read_config_file(_file, SheetError)
    validate(config, "config", f"the config ({_files[0]}{_overlays})")
except SheetError as error:
    raise WorkflowError(str(error)) from None


# `snakemake --report report.html`: this page, then every table and figure (report() outputs in report.smk)
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/tokenize.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/multiview_common.smk"
include: "workflow/rules/multiview.smk"


rule all:
    default_target: True
    input:
        TABLE_TARGETS,
        # every run's scores, what `strae record` freezes (each table reads only its own results/scores/<table>.csv)
        SCORES,
        FIGURE_TARGETS,
        MV_TABLE_TARGETS,
        MV_FIGURE_TARGETS,
