#!/bin/sh
# The namespace and the product's search attributes on a Temporal cluster (docker-compose.yml
# runs it once the server is up, in temporalio/admin-tools). Idempotent: a second run changes
# nothing. It waits for each step to be possible and exits non-zero, saying what failed, when
# one is not: the authority worker starts only after it succeeded.
#
#   TEMPORAL_ADDRESS        the frontend, host:port
#   TEMPORAL_NAMESPACE      created if missing (default: default)
#   NAMESPACE_RETENTION     of closed workflows, for a namespace this creates (default: 7d)
#   MWP_SEARCH_ATTRIBUTES   Keyword attributes, space-separated (mwp/contracts/names.py)
#   SETUP_ATTEMPTS, SETUP_DELAY   how long to wait for each step (default: 60 x 2 s)
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
: "${MWP_SEARCH_ATTRIBUTES:?MWP_SEARCH_ATTRIBUTES is required}"
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=${NAMESPACE_RETENTION:-7d}
ATTEMPTS=${SETUP_ATTEMPTS:-60}
DELAY=${SETUP_DELAY:-2}
PERMANENT=3 # a step's status when waiting cannot make it succeed

fail() {
    echo "temporal-setup: $*" >&2
    exit 1
}

# retry WHAT COMMAND...: run COMMAND until it succeeds, at most ATTEMPTS times; its output is
# shown only if it never does.
retry() {
    what=$1
    shift
    attempt=1
    while :; do
        status=0
        output=$("$@" 2>&1) || status=$?
        [ "$status" -eq 0 ] && return 0
        [ "$status" -ne "$PERMANENT" ] || fail "$what: $output"
        [ "$attempt" -lt "$ATTEMPTS" ] || fail "$what: failed $ATTEMPTS times, last: $output"
        attempt=$((attempt + 1))
        sleep "$DELAY"
    done
}

ensure_namespace() {
    temporal operator namespace describe --address "$TEMPORAL_ADDRESS" \
        --namespace "$NAMESPACE" >/dev/null 2>&1 ||
        temporal operator namespace create --address "$TEMPORAL_ADDRESS" \
            --namespace "$NAMESPACE" --retention "$RETENTION"
}

attributes() {
    temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" \
        --namespace "$NAMESPACE"
}

# The type NAME is registered with in the namespace (empty if none or not known yet).
type_of() {
    attributes 2>/dev/null | awk -v name="$1" '$1 == name { print $2 }'
}

# One name per call: given several --name, this CLI registers only the first. A new namespace
# is known to the frontend only once its namespace cache has refreshed: until then this fails
# with "not found", and is retried.
create_attribute() {
    temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" \
        --namespace "$NAMESPACE" --name "$1" --type Keyword 2>&1 && return 0
    registered=$(type_of "$1")
    case $registered in
    Keyword) return 0 ;;
    "") return 1 ;;
    esac
    # Waiting cannot change a registered type: say so now rather than after every retry.
    echo "$1 is registered as $registered, not Keyword"
    return "$PERMANENT"
}

retry "the Temporal server at $TEMPORAL_ADDRESS" \
    temporal operator cluster health --address "$TEMPORAL_ADDRESS"
retry "namespace $NAMESPACE" ensure_namespace
for name in $MWP_SEARCH_ATTRIBUTES; do
    retry "search attribute $name" create_attribute "$name"
done
listed=$(attributes) || fail "cannot list the search attributes of namespace $NAMESPACE"
for name in $MWP_SEARCH_ATTRIBUTES; do
    echo "$listed" | awk -v name="$name" '$1 == name && $2 == "Keyword" { found = 1 }
        END { exit !found }' || fail "search attribute $name is not a Keyword of $NAMESPACE"
done
echo "temporal-setup: namespace $NAMESPACE has the search attributes $MWP_SEARCH_ATTRIBUTES"
