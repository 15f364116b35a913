#!/usr/bin/env bash
# Run ON the offline GPU box, from the checkout:   bash tools/offline_unpack.sh [BUNDLE]      (default: bundle)
# BUNDLE is the folder `strae bundle` wrote on a machine with the prepared resources (README "Training on an
# offline GPU box"). Steps, each skipped or checked when already done (the script is idempotent):
#   1. a venv over the box's own packages (--system-site-packages: the box's torch is used, never reinstalled)
#   2. the bundle's wheels into it, from the folder only (--no-index: nothing is downloaded)
#   3. strae importable from this checkout: a .pth file and a `strae` command (no build step, so no setuptools)
#   4. `strae bundle --unpack`: resources/ restored with their mtimes, evaluation files placed (sha256-checked)
#   5. BUNDLE/env.sh to source before the campaign's commands, which it prints (rewritten with this box's paths by
#      `strae bundle --unpack`; `strae bundle` wrote a relative one, which serves if the folder is copied over again)
# Environment: PYTHON (default: the first of python3 / python that imports torch; leave it unset on a lent box, whose
# Python was /opt/torch/.venv/bin/python3.12 on 2026-11-30); STRAE_OFFLINE_VENV (default .venv-offline).
set -euo pipefail

die() { echo "offline_unpack: $*" >&2; exit 1; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
[ -d "${1:-bundle}" ] || die "${1:-bundle}: no such folder; copy the folder \`strae bundle\` wrote here"
BUNDLE=$(cd "${1:-bundle}" && pwd)
[ -f "$BUNDLE/manifest.json" ] || die "$BUNDLE/manifest.json missing: the bundle is incomplete, write it again"
VENV=${STRAE_OFFLINE_VENV:-$REPO/.venv-offline}
# the box's interpreter: the first of python3 / python that imports torch (they may be different Pythons)
if [ -z "${PYTHON:-}" ]; then
    for candidate in python3 python; do
        if "$candidate" -c 'import torch' 2>/dev/null; then PYTHON=$candidate; break; fi
    done
fi
PYTHON=${PYTHON:-python3}
# a PYTHON set for another machine (2026-11-30: the pyenv path of the machine that wrote the bundle, passed on
# the box) failed as bash's bare "No such file or directory"; name it, and what this box has, instead
"$PYTHON" -c 'import sys' 2>/dev/null || die "PYTHON=$PYTHON: cannot run it on this box; leave PYTHON unset (the \
first of python3 / python that imports torch is used) or give this box's interpreter (on PATH: $(command -v python3 \
python 2>/dev/null | tr '\n' ' ' | grep . || echo none))"

# 1. venv. A Python without ensurepip (Debian's python3 without python3-venv) gets a venv without pip, which then
#    runs the box's own pip (visible through --system-site-packages) and installs into the venv.
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv --system-site-packages "$VENV" 2>/dev/null \
        || { rm -rf "$VENV"; "$PYTHON" -m venv --system-site-packages --without-pip "$VENV"; }
fi
PY="$VENV/bin/python"
# --system-site-packages shows the venv the base prefix's site-packages only; packages the box keeps in its user
# site (pip install --user) or on PYTHONPATH stay invisible, and pip would then look for them in the wheels. A .pth
# file lists the box interpreter's package folders that the venv does not already have.
VENV_SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$VENV_SITE"
"$PYTHON" -c '
import os, sys
for entry in sys.path:
    if os.path.isdir(entry) and os.path.basename(entry) in ("site-packages", "dist-packages"):
        print(entry)
' | while IFS= read -r folder; do
    # an `if`, not `&&`: a last folder already on the venv's path would end the loop with status 1 (set -e)
    if "$PY" -c 'import sys; sys.exit(sys.argv[1] in sys.path)' "$folder"; then echo "$folder"; fi
done > "$VENV_SITE/strae-box-packages.pth"
torch_version() { "$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "none"; }
TORCH_BEFORE=$(torch_version)

# 2. wheels: the box resolves requirements.txt against its own packages; no-deps.txt lists packages whose
#    deliberately dropped dependency (manifest.json: wheels.dropped) pip would otherwise insist on.
if compgen -G "$BUNDLE/wheels/*.whl" >/dev/null; then
    "$PY" -m pip --version >/dev/null 2>&1 || die "no pip for $PY (neither in the venv nor the box's Python)"
    PIP=("$PY" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$BUNDLE/wheels")
    "${PIP[@]}" -r "$BUNDLE/wheels/requirements.txt"
    if grep -q . "$BUNDLE/wheels/no-deps.txt" 2>/dev/null; then
        "${PIP[@]}" --no-deps -r "$BUNDLE/wheels/no-deps.txt"
    fi
fi
[ "$(torch_version)" = "$TORCH_BEFORE" ] || die "torch changed ($TORCH_BEFORE -> $(torch_version)); check the wheels"

# 3. strae from this checkout (what `pip install -e .` would give, without building anything)
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$SITE"
printf '%s\n%s\n' "$REPO/src" "$REPO" > "$SITE/strae-offline.pth"
printf '#!%s\nimport sys\n\nfrom strae.cli import main\n\nsys.exit(main())\n' "$PY" > "$VENV/bin/strae"
chmod +x "$VENV/bin/strae"
STRAE_AT=$("$PY" -c 'import strae; print(strae.__file__)')
[ "$STRAE_AT" = "$REPO/src/strae/__init__.py" ] || die "strae imports from $STRAE_AT, not this checkout"

# 4. resources and evaluation files; 5. BUNDLE/env.sh rewritten with this venv's and bundle's paths (by the same
#    command, strae.bundle.env_script: run from the venv, it knows where the venv is)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$VENV/bin/strae" bundle --unpack "$BUNDLE"
echo "torch $TORCH_BEFORE (the box's own); snakemake $("$VENV/bin/snakemake" --version 2>/dev/null || echo 'not installed')"
cat <<EOF

ready. Next, on a box held as long as the work takes:
  source $BUNDLE/env.sh
  snakemake --profile profiles/gpu results/table2.csv
  strae record --name NAME                                    # e.g. h100-\$(date +%F)
  tar -cJf record.tar.xz reproductions/NAME README.md logs    # what comes back: one small file
or, on a box lent in calls of a few minutes (each call resumes; README "In time-boxed chunks"), the targets expanded:
  first call:  bash tools/offline_unpack.sh BUNDLE && source BUNDLE/env.sh && CHUNK_S=\$((580 - SECONDS)) \\
                   bash tools/campaign_chunk.sh TARGET...       # CHUNK_S: what the unpacking left of the call
  later calls: source $BUNDLE/env.sh && bash tools/campaign_chunk.sh TARGET...
  # then, where the repository is kept: bash tools/campaign_record.sh NAME CARRY ARCHIVE... # each call's, oldest first
EOF
