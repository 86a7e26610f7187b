"""Runs SQL statements as one user through psycopg 3 (libpq's SCRAM-SHA-256) and prints one
line per step, for crates/tessera/tests/security.rs:

    /usr/bin/python3 crates/tessera/tests/python/sql_as.py HOST PORT USER PASSWORD SQL...

"connected", then per statement "rows: a,b;c,d" (a query), "count: n" (otherwise) or
"error: SQLSTATE message"; a failed connection prints "connect error: SQLSTATE message".
Each statement runs in autocommit mode; psycopg 3 sends a statement without parameters as a
simple query.
"""

import sys

import psycopg


def run(connection, sql):
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, prepare=False)
            if cursor.description is None:
                return f"count: {cursor.rowcount}"
            rows = cursor.fetchall()
            return "rows: " + ";".join(",".join(str(value) for value in row) for row in rows)
    except psycopg.Error as error:
        message = str(error).strip().replace("\n", " ")
        return f"error: {error.sqlstate} {message}"


def main():
    host, port, user, password, *statements = sys.argv[1:]
    try:
        connection = psycopg.connect(
            host=host,
            port=port,
            user=user,
            password=password,
            dbname="tessera",
            connect_timeout=10,
            autocommit=True,
        )
    except psycopg.OperationalError as error:
        # libpq reports a FATAL at connection time as text; its SQLSTATE is in the message's
        # diagnostic when the server sent one.
        sqlstate = getattr(getattr(error, "diag", None), "sqlstate", None)
        message = str(error).strip().replace("\n", " ")
        print(f"connect error: {sqlstate} {message}")
        return
    print("connected", flush=True)
    with connection:
        for sql in statements:
            print(run(connection, sql), flush=True)


main()
