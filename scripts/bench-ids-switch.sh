#!/bin/bash
# Packets per second of ovs-vswitchd forwarding an Internet-like packet
# mix with no IDS, with gpu_ids on the CUDA backend and with gpu_ids on
# the CPU backend, in alert mode: bench-services-switch.sh's "ids-alert"
# rows, under the name and options the earlier measurements used.
#
#   bench-ids-switch.sh --rules FILE [--modes "none cuda cpu"]
#                       [--seconds S] [--count N] [--out FILE]
#
# "none" always runs (each backend's row is printed beside it).
set -e -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
args=()
backends="cuda cpu"
while test $# -gt 0; do
    case $1 in
        --modes) backends=$(echo " $2 " | sed 's/ none / /g'); shift ;;
        --rules|--seconds|--count|--out) args+=("$1" "$2"); shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
exec "$SRC/scripts/bench-services-switch.sh" --services ids-alert \
    --backends "$backends" "${args[@]}"
