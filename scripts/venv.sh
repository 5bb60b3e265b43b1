# Sourced by the scripts that give tests a real client in Python (mcp-client.sh,
# web-client.sh): one cached venv per client under .cache/, made once and reused.
#
#   venv_install NAME IMPORT SPEC...   # .cache/NAME with SPEC installed; IMPORT must import
#   venv_python NAME IMPORT            # prints its python, or fails when IMPORT does not import

VENV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache"

venv_log() { echo "$(basename "$0" .sh): $*" >&2; }

venv_ready() {
    local py="$VENV_ROOT/$1/bin/python"
    [[ -x "$py" ]] && "$py" -c "import $2" >/dev/null 2>&1
}

venv_install() {
    local name="$1" import="$2"
    shift 2
    local venv="$VENV_ROOT/$name" py="$VENV_ROOT/$name/bin/python"
    if venv_ready "$name" "$import"; then
        venv_log "already installed in $venv"
        return 0
    fi
    mkdir -p "$VENV_ROOT"
    [[ -x "$py" ]] || "${PYTHON:-python3}" -m venv "$venv"
    "$py" -m pip install --quiet --upgrade pip
    "$py" -m pip install --quiet "$@"
    venv_ready "$name" "$import" || { venv_log "installed, but \`import $import\` fails"; return 1; }
    venv_log "installed $* in $venv"
}

venv_python() {
    venv_ready "$1" "$2" || { venv_log "not installed; run: $0 install"; return 1; }
    echo "$VENV_ROOT/$1/bin/python"
}
