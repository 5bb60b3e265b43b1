#!/usr/bin/env bash
# The whole test suite. Prepares what the tests that need real parts use (cached under
# .cache/): the local MiniLM model, a real local LLM behind an OpenAI-compatible server, the
# official Python MCP SDK (a real MCP client) and a headless browser; then checks formatting,
# runs every test, and lints (clippy, warnings denied). Where a preparation step cannot run
# (no registry access), the tests that need it skip loudly; everything else still runs.
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

# Real clients in Python, each in a cached venv: the official MCP SDK (tests/mcp.rs) and a
# headless Chromium driven by Selenium (tests/web.rs).
prepare_client() { # SCRIPT VARIABLE WHAT
  if [ -x "scripts/$1" ] && [ -z "${!2:-}" ]; then
    if py=$("scripts/$1" install >&2 && "scripts/$1" python); then
      export "$2=$py"
    else
      echo "WARNING: $3 unavailable; its tests will skip"
    fi
  fi
}
prepare_client mcp-client.sh A2RAG_TEST_MCP_PYTHON "Python MCP SDK"
prepare_client web-client.sh A2RAG_TEST_WEB_PYTHON "headless browser (chromium, selenium)"

# A throwaway PostgreSQL server (tests/kb.rs runs on both back ends, tests/scaling.rs runs
# several daemons on one database), stopped when the run ends.
if [ -x scripts/postgres.sh ] && [ -z "${A2RAG_TEST_POSTGRES:-}" ]; then
  if scripts/postgres.sh install && url=$(scripts/postgres.sh start); then
    export A2RAG_TEST_POSTGRES="$url"
    trap 'scripts/postgres.sh stop' EXIT
  else
    echo "WARNING: PostgreSQL unavailable; the PostgreSQL halves of the KB tests will skip"
  fi
fi

# In CI every real part must be there: a test that would skip for a missing one fails instead,
# so a machine where an install went wrong cannot pass green.
case "${CI:-}" in
  "" | false | 0) ;;
  *) export A2RAG_REQUIRE_ALL_PARTS=1 ;;
esac

status=0
# Formatting and lints are part of the suite: a failure here fails the run, after the tests.
cargo fmt --check || { echo "FAILED: cargo fmt --check (run cargo fmt)"; status=1; }
cargo test --all-targets --no-fail-fast || status=1
[ -n "$started_llm" ] && scripts/local-llm.sh stop
cargo clippy --all-targets -- -D warnings || { echo "FAILED: cargo clippy --all-targets -- -D warnings"; status=1; }
exit $status
