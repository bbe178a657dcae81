#!/usr/bin/env bash
# install-deps.sh — installs, on Debian 12, whatever tokd's build and tests need and the
# machine lacks (apt-get only for what is missing; nothing is downloaded at build time).
set -euo pipefail
need=()
for pkg in build-essential libasan8 libtsan2 libubsan1 clang libclang-rt-14-dev libpcre2-dev libmicrohttpd-dev libcjson-dev curl tmux; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# node and npm run the `openai` client in the server tests: the machine's own if present
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
# python3 reads the JSON answers in some end-to-end tests (e2e_tokenize, e2e_server_outputs)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps: installing ${need[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${need[@]}"
fi
