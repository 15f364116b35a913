# strae — the README's commands. `make setup` once, then `make test` / `make demo`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# pyproject extras: dev (tests), export (sentence-transformers), kernels (triton for the fused induction's CPU
# interpreter tests; on a CUDA machine torch brings its own triton: EXTRAS=dev,export)
EXTRAS ?= dev,export,kernels
# The offline data mirror (layout of ../shared/data); override with STRAE_DATA_MIRROR=... make ...
STRAE_DATA_MIRROR ?= ../shared/data
# absolute: the demo's jobs run in DEMO_DIR
override STRAE_DATA_MIRROR := $(abspath $(STRAE_DATA_MIRROR))
export STRAE_DATA_MIRROR
# Compute steps never reach the HF hub; downloads happen only in fetch steps.
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup test demo clean lint

$(BIN)/strae: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(BIN)/strae

setup: $(BIN)/strae

# TEST_WORKERS pytest-xdist workers, each taking whole test files (a file's module fixtures are built once):
# ~5-6 min on 2 idle cores (901 tests, 2026-12-01). `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

# The demo works in its own folder (DEMO_DIR): the quick profile's corpus, tokenizer and runs have the paper-scale
# ones' paths (resources/, results/runs/...), so in the checkout's root they would replace them, and the next paper
# run would find params changed and checkpoints it must refuse. The folder sees the config and the papers' numbers
# through links. DEMO_FLAGS: more snakemake options (e.g. -n).
DEMO_DIR ?= demo
demo: setup
	@case "$(abspath $(DEMO_DIR))" in "$(abspath .)"|"$(abspath .)/config"|"$(abspath .)/paper_tables") \
		echo "DEMO_DIR=$(DEMO_DIR): the checkout itself; give the demo a folder of its own" >&2; exit 2;; esac
	@for name in config paper_tables; do \
		if [ -e "$(DEMO_DIR)/$$name" ] && [ ! -L "$(DEMO_DIR)/$$name" ]; then \
			echo "$(DEMO_DIR)/$$name: a real folder, not the link make demo puts there; move it away" >&2; exit 2; fi; \
	done
	mkdir -p $(DEMO_DIR)
	ln -sfn $(abspath config) $(DEMO_DIR)/config
	ln -sfn $(abspath paper_tables) $(DEMO_DIR)/paper_tables
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --cores 2 --snakefile $(abspath Snakefile) \
		--directory $(DEMO_DIR) results/table2.csv --configfile config/quick.yaml $(DEMO_FLAGS)

lint: setup
	$(BIN)/ruff check src baselines benchmarks tests
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --lint

clean:  # the default demo folder only (a DEMO_DIR given elsewhere is the user's to remove; results/ and logs/ of
	# this checkout are paper-scale runs and their checkpoints, never touched here)
	rm -rf demo
