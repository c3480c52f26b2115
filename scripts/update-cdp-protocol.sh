#!/usr/bin/env bash
# Remakes relay/assets/devtools-protocol.json from the npm package
# devtools-protocol (the document the relay serves at /json/protocol).
# Usage: scripts/update-cdp-protocol.sh [VERSION]   (default: the latest)
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-$(npm view devtools-protocol version)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "devtools-protocol@$version" --silent >/dev/null && tar xzf devtools-protocol-*.tgz)
python3 - "$work/package/json" relay/assets/devtools-protocol.json <<'PY'
import json, sys
src, out = sys.argv[1], sys.argv[2]
js = json.load(open(f"{src}/js_protocol.json"))
browser = json.load(open(f"{src}/browser_protocol.json"))
doc = {"domains": js["domains"] + browser["domains"], "version": browser["version"]}
open(out, "w").write(json.dumps(doc, separators=(",", ":")))
PY
sed -i "s/devtools-protocol@[0-9.]*/devtools-protocol@$version/" relay/assets/README.md
echo "relay/assets/devtools-protocol.json: devtools-protocol@$version"
