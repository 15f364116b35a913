"""paper_tables/*.csv: the papers' published numbers, transcribed by hand (docs/CONTRACTS.md, paper_tables/README.md).

Three layers of checks so a transcription slip is caught:
1. every file parses: exact header, numeric mean/std, no duplicate cells, expected row/column counts;
2. spot checks of specific cells typed in here from the papers (independent of any parser);
3. when the paper texts are available (../shared/papers), every transcribed number of every row is compared, as
   printed (same digits), with the paper's own table line for that row label.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
TABLES_DIR = REPO_ROOT / "paper_tables"
PAPERS_DIR = REPO_ROOT.parent / "shared" / "papers"
BASE_HEADER = ["row", "column", "mean", "std", "note"]
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")

# file -> (extra header columns, number of printed rows, number of printed value columns, number of cells).
# "rows" counts distinct (half, row) pairs, i.e. printed table rows.
EXPECTED_SHAPES = {
    "selfstrae_table1.csv": ((), 3, 7, 21),
    "selfstrae_table2.csv": (("half",), 10, 8, 80),
    "selfstrae_table3.csv": ((), 2, 9, 10),  # two sub-tables with different columns; "Competition Rank" shared
    "selfstrae_table4.csv": ((), 5, 7, 35),
    "banyan_table1.csv": (("half",), 6, 9, 54),
    "banyan_table2.csv": (("half",), 6, 4, 24),
    "banyan_table3.csv": ((), 5, 9, 45),
    "banyan_table4.csv": ((), 3, 4, 12),
    "banyan_table5.csv": ((), 4, 4, 16),
    "banyan_table6.csv": (("tolerance",), 1, 4, 4),  # ≈10M / ≈85M: matched within their printed precision
    "banyan_table7.csv": ((), 1, 9, 9),
    "banyan_table8.csv": ((), 1, 4, 4),
    "banyan_table9.csv": ((), 7, 2, 14),
    "multiview_table1.csv": ((), 10, 8, 54),  # "—" cells (not reported) are not transcribed
    "multiview_table2.csv": ((), 10, 2, 20),
}

# (file, row, column, half or None) -> (mean, std or None): typed from the papers' PDFs/markdown.
SPOT_CHECKS = {
    ("selfstrae_table1.csv", "CECO", "Simlex", None): (19.15, 2.39),
    ("selfstrae_table1.csv", "CE", "Wordsim S", None): (46.43, 24.00),
    ("selfstrae_table1.csv", "Contrastive", "SemRel (Dev)", None): (50.13, 0.88),
    ("selfstrae_table2.csv", "k=256 u=1", "STS-B", "best_seed"): (61.6, None),
    ("selfstrae_table2.csv", "k=128 u=2", "STS-16", "mean"): (50.38, 31.92),
    ("selfstrae_table2.csv", "k=8 u=32", "# Params", "mean"): (4192, None),
    ("selfstrae_table2.csv", "k=128 u=2", "# Params", "best_seed"): (22, None),
    ("selfstrae_table3.csv", "Spanish", "Competition Rank", None): (6, None),
    ("selfstrae_table3.csv", "Afrikaans", "NL STS-B (Test)", None): (64.5, None),
    ("selfstrae_table4.csv", "StrCSE k=128 u=2", "STS-B", None): (61.30, 0.76),
    ("banyan_table1.csv", "++ CE loss", "Score", "Banyan"): (62.70, 0.001),
    ("banyan_table1.csv", "++ CE loss", "Score", "Self-StrAE"): (59.91, 0.54),
    ("banyan_table1.csv", "Self-StrAE", "SICK-R", "Self-StrAE"): (51.78, 0.29),
    ("banyan_table2.csv", "+ diag functions", "Wordsim-R", "Self-StrAE"): (58.53, 0.62),
    ("banyan_table3.csv", "GloVe", "Score", None): (33.75, 0.04),
    ("banyan_table3.csv", "+ SimCSE", "STS-15", None): (68.77, 3.00),
    ("banyan_table4.csv", "RoBERTa", "Simlex", None): (29.23, 0.64),
    ("banyan_table5.csv", "Banyan", "Afrikaans", None): (78.68, 0.30),
    ("banyan_table5.csv", "Comp. Average", "Spanish", None): (65.04, None),
    ("banyan_table6.csv", "Params", "Self-StrAE", None): (1072, None),
    ("banyan_table6.csv", "Params", "RoBERTa (M)", None): (10_000_000, None),
    ("banyan_table7.csv", "Banyan old functions", "STS-14", None): (35.8, 26.08),
    ("banyan_table8.csv", "Banyan old functions", "Score", None): (26.2, 26.2),
    ("banyan_table9.csv", "k=16 u=16", "STS Score", None): (62.2, 0.01),
    ("banyan_table9.csv", "k=128 u=2", "Lex Score", None): (49.61, 0.02),
    ("multiview_table1.csv", "Contrastive Tree", "MR", None): (64.0, None),
    ("multiview_table1.csv", "Contrastive Tree", "SICKR", None): (76.8, None),
    ("multiview_table1.csv", "Quick-thoughts", "MRPC", None): (84.0, None),
    ("multiview_table1.csv", "Tree-LSTM", "SICKR", None): (86.8, None),
    ("multiview_table2.csv", "WC", "Contrastive Tree LSTM (CTL)", None): (23.1, None),
}


def read_table(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(TABLES_DIR / name, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def find_cell(rows: list[dict[str, str]], row: str, column: str, half: str | None) -> dict[str, str]:
    matches = [r for r in rows if r["row"] == row and r["column"] == column and (half is None or r["half"] == half)]
    assert len(matches) == 1, f"expected exactly one cell ({row!r}, {column!r}, half={half!r}), got {len(matches)}"
    return matches[0]


def test_every_paper_table_is_present():
    on_disk = sorted(path.name for path in TABLES_DIR.glob("*.csv"))
    assert on_disk == sorted(EXPECTED_SHAPES), "paper_tables/*.csv differs from the tables this test knows about"
    assert (TABLES_DIR / "README.md").is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED_SHAPES))
def test_table_parses_with_expected_shape(name: str):
    extra, n_rows, n_columns, n_cells = EXPECTED_SHAPES[name]
    header, rows = read_table(name)
    assert header == BASE_HEADER + list(extra), f"{name}: header {header}"
    keys = [tuple(r[c] for c in ("half", "row", "column") if c in r) for r in rows]
    assert len(keys) == len(set(keys)), f"{name}: duplicate cells"
    for r in rows:
        where = f"{name}: {r['row']!r}/{r['column']!r}"
        assert r["row"].strip() and r["column"].strip(), f"{where}: empty label"
        assert NUMBER.match(r["mean"]), f"{where}: mean {r['mean']!r} is not a plain number"
        assert r["std"] == "" or NUMBER.match(r["std"]), f"{where}: std {r['std']!r} is not a plain number"
        if r["std"]:
            assert float(r["std"]) >= 0, f"{where}: negative std"
        for column in extra:
            if column == "tolerance":  # only approximate values carry one: a plain non-negative number
                assert r[column] == "" or (NUMBER.match(r[column]) and float(r[column]) >= 0), f"{where}: tolerance"
            else:
                assert r[column], f"{where}: empty {column!r}"
    assert len({tuple(r[c] for c in ("half", "row") if c in r) for r in rows}) == n_rows, f"{name}: printed rows"
    assert len({r["column"] for r in rows}) == n_columns, f"{name}: printed value columns"
    assert len(rows) == n_cells, f"{name}: cells"


def test_halves_use_documented_labels():
    """The `half` column separates rows that share a label; its values are documented in paper_tables/README.md."""
    assert {r["half"] for r in read_table("selfstrae_table2.csv")[1]} == {"mean", "best_seed"}
    for name in ("banyan_table1.csv", "banyan_table2.csv"):
        _, rows = read_table(name)
        assert {r["half"] for r in rows} == {"Self-StrAE", "Banyan"}
        # each half holds the same three printed row labels, in paper order
        for half in ("Self-StrAE", "Banyan"):
            labels = list(dict.fromkeys(r["row"] for r in rows if r["half"] == half))
            assert labels == [half, "+ diag functions", "++ CE loss"], (name, half, labels)


@pytest.mark.parametrize("key", sorted(SPOT_CHECKS, key=str), ids=lambda k: f"{k[0]}:{k[1]}:{k[2]}:{k[3]}")
def test_spot_check_cell(key):
    name, row, column, half = key
    mean, std = SPOT_CHECKS[key]
    cell = find_cell(read_table(name)[1], row, column, half)
    assert float(cell["mean"]) == pytest.approx(mean), f"{name} {row}/{column}: mean"
    if std is None:
        assert cell["std"] == "", f"{name} {row}/{column}: the paper prints no std"
    else:
        assert float(cell["std"]) == pytest.approx(std), f"{name} {row}/{column}: std"


def test_duplicated_rows_agree_across_tables():
    """The papers repeat some rows; the copies must carry the same numbers (a slip in one copy shows up here)."""
    def values(name, row, half=None):
        return {r["column"]: (r["mean"], r["std"]) for r in read_table(name)[1]
                if r["row"] == row and (half is None or r["half"] == half)}

    assert values("banyan_table3.csv", "Banyan") == values("banyan_table1.csv", "++ CE loss", "Banyan")
    assert values("banyan_table4.csv", "Banyan") == values("banyan_table2.csv", "++ CE loss", "Banyan")
    t4_ceco = values("selfstrae_table4.csv", "CECO k=128 u=2")
    t2_mean = values("selfstrae_table2.csv", "k=128 u=2", "mean")
    assert t4_ceco == {column: v for column, v in t2_mean.items() if column != "# Params"}
    for objective in ("Contrastive", "CE", "CECO"):
        assert values("selfstrae_table4.csv", objective) == values("selfstrae_table1.csv", objective)
    # Table 9's chosen setting (k=128, u=2) is the Banyan model of Tables 1 and 2.
    t9 = values("banyan_table9.csv", "k=128 u=2")
    sts = values("banyan_table1.csv", "++ CE loss", "Banyan")["Score"][0]
    lex = values("banyan_table2.csv", "++ CE loss", "Banyan")["Score"][0]
    assert float(t9["STS Score"][0]) == pytest.approx(float(sts))
    assert float(t9["Lex Score"][0]) == pytest.approx(float(lex))



def test_parameter_counts_follow_the_model_equations():
    """# Params = non-embedding parameters: linear functions 4u^2 + 3u (SemEval eqs.), diagonal functions 7u (Banyan
    eqs. 7-8). The paper's k=64 u=4 row prints 88 (formula: 76); that cell must carry a note saying so."""
    for r in read_table("selfstrae_table2.csv")[1]:
        if r["column"] != "# Params":
            continue
        u = int(re.fullmatch(r"k=\d+ u=(\d+)", r["row"])[1])
        if r["row"] == "k=64 u=4":
            assert r["mean"] == "88" and "76" in r["note"], r
        else:
            assert int(r["mean"]) == 4 * u * u + 3 * u, r
    params = {r["column"]: int(r["mean"]) for r in read_table("banyan_table6.csv")[1]}
    assert params["Self-StrAE"] == 4 * 16 * 16 + 3 * 16  # the original k = u = 16 Self-StrAE
    assert params["Banyan"] == 7 * 2  # the chosen k = 128, u = 2

# ---- cross-check against the paper texts (skipped when ../shared/papers is absent) ----

PAPER_FILE = {"selfstrae": "selfstrae_semeval2024.md", "banyan": "banyan.md",
              "multiview": "contrastive_multiview_treelstm.md"}
# Cells that are not in the row's printed line, with the reason (see the cell's `note`).
NOT_IN_ROW_LINE = {
    ("selfstrae_table3.csv", "Afrikaans", "Competition Rank"): "the rank digit is merged into the extracted header",
    ("banyan_table6.csv", "Params", "RoBERTa (M)"): "printed as ≈10M",
    ("banyan_table6.csv", "Params", "XLM-R"): "printed as ≈85M",
}


def printed_numbers(cells: list[str]) -> list[str]:
    """The numbers of a printed table line, as strings (LaTeX bold/± markup removed)."""
    text = " ".join(cells).replace("\\textbf", " ").replace("\\pm", " ")
    return re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text)


@pytest.mark.parametrize("name", sorted(EXPECTED_SHAPES))
def test_every_number_matches_the_paper_text(name: str):
    paper = PAPERS_DIR / PAPER_FILE[name.split("_")[0]]
    if not paper.is_file():
        pytest.skip(f"{paper} not available; spot checks above still apply")
    lines = [line.split("\t") for line in paper.read_text(encoding="utf-8").splitlines() if "\t" in line]
    _, rows = read_table(name)
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r.get("half", ""), r["row"]), []).append(r)
    for (half, label), cells in groups.items():
        ours = []
        for r in cells:
            if (name, r["row"], r["column"]) in NOT_IN_ROW_LINE:
                continue
            ours += [r["mean"]] + ([r["std"]] if r["std"] else [])
        kxu = re.fullmatch(r"k=(\d+) u=(\d+)", label)
        if kxu:  # k and u are the first two printed cells of the line
            candidates = [printed_numbers(line[2:]) for line in lines
                          if [c.strip() for c in line[:2]] == [kxu[1], kxu[2]]]
        else:
            candidates = [printed_numbers(line[1:]) for line in lines
                          if line[0].replace("$", "").replace("\\textbf", "").strip() == label]
        assert ours in candidates, (
            f"{name}: row {label!r} (half {half!r}) = {ours} matches no printed line with that label: {candidates}")
