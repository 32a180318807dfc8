#!/bin/sh
# Temporal's two PostgreSQL databases, created if missing and brought up to the schema of this
# temporalio/admin-tools release (its temporal-sql-tool and schema files), then exit.
# docker-compose.yml runs it before the server on every `up`: each step is idempotent, and
# after an image upgrade it applies the new schema versions. The settings are the server's own
# (DB, POSTGRES_SEEDS, ...; docker-compose.yml gives both the same), so the two cannot differ.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${POSTGRES_PWD:?POSTGRES_PWD is required}"
PLUGIN=${DB:-postgres12}
PORT=${DB_PORT:-5432}
SCHEMA=${SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}
export SQL_PASSWORD="$POSTGRES_PWD" # read by temporal-sql-tool, kept off the command line

sql_tool() {
    temporal-sql-tool --plugin "$PLUGIN" --ep "$POSTGRES_SEEDS" -p "$PORT" \
        -u "$POSTGRES_USER" "$@"
}

# database: schema folder (under $SCHEMA)
for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
    database=${pair%%:*}
    folder=${pair#*:}
    echo "temporal-schema: database $database"
    sql_tool --db "$database" create-database
    # Only sets up the version table: skipped once a schema is there.
    sql_tool --db "$database" setup-schema -v 0.0
    sql_tool --db "$database" update-schema -d "$SCHEMA/$folder/versioned"
done
echo "temporal-schema: done"
