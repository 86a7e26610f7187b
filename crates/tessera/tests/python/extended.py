"""Runs SQL statements with parameters through psycopg 3's extended query protocol (Parse,
Bind, Describe, Execute, Sync: `prepare=True`) and prints one line per statement, for
crates/tessera/tests/sql_pgcompat.rs:

    /usr/bin/python3 crates/tessera/tests/python/extended.py HOST PORT STATEMENT...

Each STATEMENT is a JSON array: the SQL (with %s placeholders) and its parameters. Per
statement the output is "rows: a,b;c,d" (rows returned; values as Python's str() of the
type psycopg decoded, so a TIMESTAMPTZ prints with "+00:00"), preceded by the column type
OIDs "types: 1184,23", then "count: n" (the command's row count); or "error: SQLSTATE message".
Autocommit: every statement commits on its own.
"""

import json
import sys

import psycopg


def run(connection, statement):
    sql, parameters = json.loads(statement)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, parameters, prepare=True)
            lines = []
            if cursor.description is not None:
                oids = ",".join(str(column.type_code) for column in cursor.description)
                rows = cursor.fetchall()
                lines.append(f"types: {oids}")
                lines.append(
                    "rows: " + ";".join(",".join(str(value) for value in row) for row in rows)
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
