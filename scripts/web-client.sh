#!/usr/bin/env bash
# A real browser for tests/web.rs: Debian's `chromium` and `chromium-driver` (installed with
# apt-get where missing and this user may), driven by Selenium, with prometheus_client to
# parse /metrics, in a cached venv.
#
#   scripts/web-client.sh install   # browser + venv in .cache/web-venv (cached)
#   scripts/web-client.sh python    # prints the venv's python, for A2RAG_TEST_WEB_PYTHON
#
# Without them the browser test skips loudly; the page's API tests still run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

SPEC=("selenium>=4.20,<5" "prometheus-client>=0.20")
IMPORT="selenium.webdriver, prometheus_client.parser"

browser_ready() { command -v chromedriver >/dev/null && command -v chromium >/dev/null; }

install_browser() {
    browser_ready && return 0
    local sudo=""
    if [[ "$(id -u)" != 0 ]]; then
        sudo -n true 2>/dev/null || { venv_log "chromium missing and this user cannot apt-get install it"; return 1; }
        sudo="sudo -n"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # The package lists may be stale on a fresh machine: update once, only if needed.
    $sudo apt-get install -y -qq chromium chromium-driver >&2 ||
        { $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq chromium chromium-driver >&2; }
    browser_ready || { venv_log "chromium installed, but chromium or chromedriver is not on PATH"; return 1; }
    venv_log "installed chromium and chromium-driver"
}

case "${1:-}" in
    install) install_browser && venv_install web-venv "$IMPORT" "${SPEC[@]}" ;;
    python) browser_ready && venv_python web-venv "$IMPORT" ;;
    *)
        echo "usage: $0 {install|python}" >&2
        exit 2
        ;;
esac
