#!/usr/bin/env bash
# A real MCP client for tests: the official Python SDK (PyPI `mcp`) in a cached venv.
#
#   scripts/mcp-client.sh install   # venv in .cache/mcp-venv (cached; under a minute first time)
#   scripts/mcp-client.sh python    # prints the venv's python, for A2RAG_TEST_MCP_PYTHON
#
# tests/mcp.rs runs tests/mcp_client.py with that python against `a2rag mcp`; without it the
# test skips loudly.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

# The SDK's major version pins the client API tests/mcp_client.py is written against.
SPEC="${A2RAG_MCP_SDK:-mcp>=1.9,<3}"
IMPORT="mcp.client.stdio, mcp.client.session"

case "${1:-}" in
    install) venv_install mcp-venv "$IMPORT" "$SPEC" ;;
    python) venv_python mcp-venv "$IMPORT" ;;
    *)
        echo "usage: $0 {install|python}" >&2
        exit 2
        ;;
esac
