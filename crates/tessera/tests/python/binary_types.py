"""Runs SQL statements through psycopg 3's extended protocol with BINARY results and
parameters, for crates/tessera/tests/sql_types.rs:

    /usr/bin/python3 crates/tessera/tests/python/binary_types.py HOST PORT STATEMENT...

Each STATEMENT is a JSON array: the SQL (with %b placeholders: binary parameters) and its
parameters; a parameter written as {"decimal": "12.50"} is sent as a Python Decimal (so
psycopg sends PostgreSQL's binary NUMERIC), {"uuid": "…"} as a uuid.UUID (binary uuid),
{"timedelta": [days, seconds, microseconds]} as a datetime.timedelta (binary interval) and
{"jsonb": value} as psycopg's Jsonb wrapper (binary jsonb). Per statement the output is
"types: <oids>", then "rows: " with each value as "<python type>:<str(value)>" (so a NUMERIC
decoded from the binary format prints as "Decimal:12.50"), then "count: n"; or
"error: SQLSTATE message". Autocommit.
"""

import datetime
import json
import sys
import uuid
from decimal import Decimal

import psycopg
from psycopg.types.json import Jsonb


def parameter(value):
    if isinstance(value, dict) and "decimal" in value:
        return Decimal(value["decimal"])
    if isinstance(value, dict) and "uuid" in value:
        return uuid.UUID(value["uuid"])
    if isinstance(value, dict) and "timedelta" in value:
        days, seconds, microseconds = value["timedelta"]
        return datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds)
    if isinstance(value, dict) and "jsonb" in value:
        return Jsonb(value["jsonb"])
    return value


def run(connection, statement):
    sql, parameters = json.loads(statement)
    try:
        with connection.cursor(binary=True) as cursor:
            cursor.execute(sql, [parameter(value) for value in parameters], prepare=True)
            lines = []
            if cursor.description is not None:
                oids = ",".join(str(column.type_code) for column in cursor.description)
                rows = cursor.fetchall()
                lines.append(f"types: {oids}")
                lines.append(
                    "rows: "
                    + ";".join(
                        ",".join(f"{type(value).__name__}:{value}" for value in row)
                        for row in rows
                    )
                )
            lines.append(f"count: {cursor.rowcount}")
            return "\n".join(lines)
    except psycopg.Error as error:
        message = str(error).strip().replace("\n", " ")
        return f"error: {error.sqlstate} {message}"


def main():
    host, port = sys.argv[1], sys.argv[2]
    with psycopg.connect(
        host=host, port=port, user="tessera", dbname="tessera", autocommit=True
    ) as connection:
        for statement in sys.argv[3:]:
            print(run(connection, statement), flush=True)


if __name__ == "__main__":
    main()
