#!/usr/bin/env bash
# One venv per peer framework for peers/compare.py, under peers/.venvs/NAME (or $PEER_VENVS/NAME).
# Never a dependency of asyncfl. Usage: peers/setup.sh [flwr pfl appfl fedlab]
set -euo pipefail
venvs=${PEER_VENVS:-$(dirname "$0")/.venvs}
# torch and torchvision pinned in one command, as for asyncfl (an unpinned torchvision pulls a CUDA torch),
# the pins read from asyncfl's pyproject.toml, their one place
mapfile -t torch < <(grep -oE '"torch(vision)?==[0-9.]+"' "$(dirname "$0")/../pyproject.toml" | tr -d '"')
for name in "${@:-flwr pfl appfl fedlab}"; do
  for peer in $name; do
    python3 -m venv "$venvs/$peer"
    pip=("$venvs/$peer/bin/python" -m pip install --quiet)
    case $peer in
      # flwr 1.42 asks for certifi ≥ 2026.10.19; where the index has none yet, its other requirements
      # (ray for the simulation engine) are installed first and flwr itself without them.
      flwr) if ! "${pip[@]}" "${torch[@]}" "flwr[simulation]==1.42.0"; then
              "${pip[@]}" "${torch[@]}" "ray==2.55.1" certifi "numpy>=1.26,<3" "grpcio>=1.70,<2" \
                "grpcio-health-checking>=1.70,<2" "protobuf>=5.28,<7" "cryptography>=50,<51" "pycryptodome>=3.18,<4" \
                "iterators>=0.0.2,<0.0.3" "typer>=0.13,<0.21" "uv>=0.13.5,<0.14" "tomli>=2.0.1,<3" "tomli-w>=1,<2" \
                "pathspec>=1.0.4,<2" "prompt-toolkit>=3.0.52,<4" "rich>=14,<15" "pyyaml>=6.0.2,<7" "requests>=2.33,<3" \
                "httpx>=0.28.1,<1" "click>=8,<9" "packaging>=24,<26" "sqlalchemy[asyncio]>=2.0.45,<3" "alembic>=1.18.1,<2" \
                "uvicorn[standard]>=0.49,<0.50" "fastapi>=0.138,<0.139" "starlette>=1.3.1,<1.4"
              "${pip[@]}" --no-deps flwr==1.42.0
            fi ;;
      pfl) "${pip[@]}" "${torch[@]}" pfl==0.6.0 ;;
      appfl) "${pip[@]}" "${torch[@]}" appfl==1.12.0 ;;
      fedlab) "${pip[@]}" "${torch[@]}" fedlab==1.3.0 ;;
      *) echo "unknown peer $peer: choose flwr, pfl, appfl or fedlab" >&2; exit 2 ;;
    esac
    echo "$peer: $venvs/$peer"
  done
done
