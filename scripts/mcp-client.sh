#!/usr/bin/env bash
# A real MCP client for tests: the official Python SDK (PyPI `mcp`) in a cached venv.
#
#   scripts/mcp-client.sh install   # venv in .cache/mcp-venv (cached; under a minute first time)
#   scripts/mcp-client.sh python    # prints the venv's python, for A2RAG_TEST_MCP_PYTHON
#
# tests/mcp.rs runs tests/mcp_client.py with that python against `a2rag mcp`; without it the
# test skips loudly.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.cache/mcp-venv"
PY="$VENV/bin/python"
PYTHON="${PYTHON:-python3}"
# The SDK's major version pins the client API tests/mcp_client.py is written against.
SPEC="${A2RAG_MCP_SDK:-mcp>=1.9,<3}"

log() { echo "mcp-client: $*" >&2; }

installed() {
    [[ -x "$PY" ]] && "$PY" -c 'import mcp.client.stdio, mcp.client.session' >/dev/null 2>&1
}

cmd_install() {
    if installed; then
        log "already installed in $VENV ($("$PY" -m pip show mcp 2>/dev/null | sed -n 's/^Version: /mcp /p'))"
        return 0
    fi
    mkdir -p "$(dirname "$VENV")"
    [[ -x "$PY" ]] || "$PYTHON" -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet "$SPEC"
    installed || { log "installed, but \`import mcp\` fails"; return 1; }
    log "installed $("$PY" -m pip show mcp | sed -n 's/^Version: /mcp /p') in $VENV"
}

case "${1:-}" in
    install) cmd_install ;;
    python)
        installed || { log "not installed; run: scripts/mcp-client.sh install"; exit 1; }
        echo "$PY"
        ;;
    *)
        echo "usage: $0 {install|python}" >&2
        exit 2
        ;;
esac
