"""SQLAlchemy Core against a Tessera cluster (issue 20): create_all, insert, a join, reflection.

Usage: sqlalchemy_core.py HOST PORT USER PASSWORD

Prints one line per checked step ("step: value"); any failed assertion or driver error exits
non-zero with its traceback. Runs SQLAlchemy 1.4 over psycopg2 (Debian's python3-sqlalchemy
and python3-psycopg2, which scripts/test installs).
"""

import datetime
import sys

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    func,
    inspect,
    select,
    text,
)


def main():
    host, port, user, password = sys.argv[1:5]
    engine = create_engine(
        f"postgresql+psycopg2://{user}:{password}@{host}:{port}/tessera",
        isolation_level="AUTOCOMMIT",
    )
    metadata = MetaData()
    authors = Table(
        "authors",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("name", Text, nullable=False),
        Column("country", String(40), server_default=text("'unknown'")),
        Column("joined", DateTime, server_default=func.now()),
    )
    books = Table(
        "books",
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=False),
        Column("author_id", Integer, nullable=False),
        Column("title", Text),
        Index("books_author", "author_id"),
    )
    # has_table finds no table on a fresh cluster; then create_all creates both.
    assert not inspect(engine).has_table("authors")
    metadata.create_all(engine)
    assert inspect(engine).has_table("authors")
    print("create_all: ok")

    with engine.connect() as connection:
        connection.execute(authors.insert(), {"id": 1, "name": "Ada", "country": "UK"})
        # Leaves country and joined out: the server fills in their DEFAULTs.
        connection.execute(authors.insert(), {"id": 2, "name": "Grace"})
        connection.execute(
            books.insert(),
            [
                {"id": 10, "author_id": 1, "title": "Notes"},
                {"id": 11, "author_id": 2, "title": "Compilers"},
                {"id": 12, "author_id": 1, "title": "Engines"},
            ],
        )
        joined = connection.execute(
            select(authors.c.name, books.c.title)
            .select_from(authors.join(books, books.c.author_id == authors.c.id))
            .order_by(books.c.id)
        ).all()
        assert [tuple(row) for row in joined] == [
            ("Ada", "Notes"),
            ("Grace", "Compilers"),
            ("Ada", "Engines"),
        ], joined
        print("join:", [tuple(row) for row in joined])
        grace = connection.execute(
            select(authors.c.country, authors.c.joined).where(authors.c.id == 2)
        ).one()
        assert grace.country == "unknown", grace
        assert isinstance(grace.joined, datetime.datetime), grace
        print("defaults:", grace.country, type(grace.joined).__name__)

    inspector = inspect(engine)
    tables = sorted(inspector.get_table_names())
    # kv is the built-in table of the RESP namespace (docs/internals/sql.md).
    assert tables == ["authors", "books", "kv"], tables
    print("tables:", tables)

    columns = inspector.get_columns("authors")
    described = [
        (c["name"], str(c["type"]), c["nullable"], c["default"]) for c in columns
    ]
    assert [c[0] for c in described] == ["id", "name", "country", "joined"], described
    assert described[0][1:3] == ("INTEGER", False), described
    assert described[1][1:3] == ("TEXT", False), described
    assert described[2][1:3] == ("VARCHAR(40)", True), described
    assert described[2][3] == "'unknown'::character varying", described
    assert described[3][1:3] == ("TIMESTAMP", True), described
    assert columns[3]["type"].timezone is False, columns[3]
    assert described[3][3] == "now()", described
    print("columns authors:", described)
    book_columns = [
        (c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns("books")
    ]
    assert book_columns == [
        ("id", "BIGINT", False),
        ("author_id", "INTEGER", False),
        ("title", "TEXT", True),
    ], book_columns
    print("columns books:", book_columns)

    pk = inspector.get_pk_constraint("books")
    assert pk["constrained_columns"] == ["id"], pk
    print("pk books:", pk["constrained_columns"], pk["name"])
    indexes = inspector.get_indexes("books")
    assert [(i["name"], i["column_names"], i["unique"]) for i in indexes] == [
        ("books_author", ["author_id"], False)
    ], indexes
    print("indexes books:", [(i["name"], i["column_names"]) for i in indexes])
    foreign = inspector.get_foreign_keys("books")
    assert foreign == [], foreign
    print("foreign keys books:", foreign)
    assert inspector.get_unique_constraints("books") == []
    assert inspector.get_check_constraints("authors") == []

    reflected = MetaData()
    reflected.reflect(bind=engine)
    assert sorted(reflected.tables) == ["authors", "books", "kv"], reflected.tables
    kv = reflected.tables["kv"]
    assert [(c.name, str(c.type), c.nullable) for c in kv.columns] == [
        ("key", "BYTEA", False),
        ("value", "BYTEA", False),
    ], list(kv.columns)
    assert [c.name for c in reflected.tables["books"].primary_key] == ["id"]
    assert [i.name for i in reflected.tables["books"].indexes] == ["books_author"]
    with engine.connect() as connection:
        count = connection.execute(
            select(func.count()).select_from(reflected.tables["books"])
        ).scalar()
    assert count == 3, count
    print("reflect:", sorted(reflected.tables), count)

    metadata.drop_all(engine)
    assert inspect(engine).get_table_names() == ["kv"]
    print("drop_all: ok")


if __name__ == "__main__":
    main()
