#!/usr/bin/env bash
# The whole test suite. Prepares what the tests that need real parts use (cached under
# .cache/): the local MiniLM model, a real local LLM behind an OpenAI-compatible server and
# the official Python MCP SDK (a real MCP client), then checks formatting, runs every test, and lints (clippy, warnings denied). Where a
# preparation step cannot run (no registry access), the tests that need it skip loudly;
# everything else still runs.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/fetch-minilm.sh ]; then
  scripts/fetch-minilm.sh || echo "WARNING: MiniLM model unavailable; its tests will skip"
fi

started_llm=""
if [ -x scripts/local-llm.sh ] && [ -z "${A2RAG_TEST_LLM_URL:-}" ]; then
  if scripts/local-llm.sh install; then
    if url=$(scripts/local-llm.sh start); then
      export A2RAG_TEST_LLM_URL="$url"
      started_llm=1
    fi
  fi
  [ -n "$started_llm" ] || echo "WARNING: local LLM unavailable; the real-LLM tests will skip"
fi

# The official Python MCP SDK, for tests/mcp.rs (a real MCP client driving `a2rag mcp`).
if [ -x scripts/mcp-client.sh ] && [ -z "${A2RAG_TEST_MCP_PYTHON:-}" ]; then
  if py=$(scripts/mcp-client.sh install >&2 && scripts/mcp-client.sh python); then
    export A2RAG_TEST_MCP_PYTHON="$py"
  else
    echo "WARNING: Python MCP SDK unavailable; the MCP client test will skip"
  fi
fi

status=0
# Formatting and lints are part of the suite: a failure here fails the run, after the tests.
cargo fmt --check || { echo "FAILED: cargo fmt --check (run cargo fmt)"; status=1; }
cargo test --all-targets --no-fail-fast || status=1
[ -n "$started_llm" ] && scripts/local-llm.sh stop
cargo clippy --all-targets -- -D warnings || { echo "FAILED: cargo clippy --all-targets -- -D warnings"; status=1; }
exit $status
