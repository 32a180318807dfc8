#!/bin/sh
# retry.sh COMMAND [ARG...]: run COMMAND until it exits 0, at most RETRY_ATTEMPTS times
# (default 40), RETRY_DELAY seconds apart (default 3); exit 1 if it never does.
#
# docker-compose.yml provisions the Organization with it (`mwp registry init`): the command
# needs the authority worker polling, which starts at about the same time.
set -eu

[ "$#" -gt 0 ] || {
    echo "usage: retry.sh COMMAND [ARG...]" >&2
    exit 2
}
ATTEMPTS=${RETRY_ATTEMPTS:-40}
DELAY=${RETRY_DELAY:-3}

attempt=1
until "$@"; do
    if [ "$attempt" -ge "$ATTEMPTS" ]; then
        echo "retry.sh: '$*' failed $ATTEMPTS times" >&2
        exit 1
    fi
    echo "retry.sh: '$*' failed (attempt $attempt of $ATTEMPTS); again in $DELAY s" >&2
    attempt=$((attempt + 1))
    sleep "$DELAY"
done
