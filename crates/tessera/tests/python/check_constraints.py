"""SQLAlchemy Core and psycopg2 with CHECK constraints (issue 20): create_all of a table with
column and table CHECKs, reflection of them, and the error a violating insert raises.

Usage: check_constraints.py HOST PORT USER PASSWORD

Prints one line per checked step ("step: value"); any failed assertion or driver error exits
non-zero with its traceback. Run against PostgreSQL 15 and Tessera, the lines must be equal.
"""

import sys

import psycopg2
from sqlalchemy import (
    CheckConstraint,
    Column,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    inspect,
)
from sqlalchemy.exc import IntegrityError


def main():
    host, port, user, password = sys.argv[1:5]
    engine = create_engine(
        f"postgresql+psycopg2://{user}:{password}@{host}:{port}/tessera",
        isolation_level="AUTOCOMMIT",
    )
    metadata = MetaData()
    wallets = Table(
        "wallets",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("owner", Text, nullable=False),
        Column("balance", Integer, CheckConstraint("balance >= 0", name="nonneg")),
        Column("cap", Integer),
        CheckConstraint("balance <= cap", name="under_cap"),
    )
    metadata.drop_all(engine)
    metadata.create_all(engine)
    print("create_all: ok")
    checks = sorted(
        (check["name"], check["sqltext"])
        for check in inspect(engine).get_check_constraints("wallets")
    )
    print(f"check constraints: {checks}")
    with engine.connect() as connection:
        connection.execute(wallets.insert(), [{"id": 1, "owner": "ann", "balance": 5, "cap": 9}])
        try:
            connection.execute(
                wallets.insert(), [{"id": 2, "owner": "bob", "balance": 10, "cap": 9}]
            )
            raise AssertionError("the violating insert was accepted")
        except IntegrityError as error:
            original = error.orig
            assert isinstance(original, psycopg2.errors.CheckViolation), type(original)
            print(f"violation: {original.pgcode} {original.diag.message_primary}")
            print(f"detail: {original.diag.message_detail}")
        rows = connection.execute(wallets.select().order_by(wallets.c.id)).fetchall()
        print(f"rows: {[tuple(row) for row in rows]}")
    metadata.drop_all(engine)
    print("drop_all: ok")


if __name__ == "__main__":
    main()
