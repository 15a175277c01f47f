"""The fresh-install script: files by concept, assembled in one documented order.

``shared-sql/schema/`` holds one file per concept, named ``NN_name.sql``; the script is every
such file in file-name order (``pgque.postgres._sql.schema_files``). These checks need no
database: the catalog comparison with the migrations is in ``test_pg_setup.py``.
"""

from __future__ import annotations

import re

from pgque.postgres._sql import LATEST_VERSION, migrations, schema_files, schema_sql, sql_files

#: Every function the fresh install creates, by name.
_CREATE_FUNCTION = re.compile(
    r"^CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+pgque_fifo\.(pgque_\w+)\s*\(", re.I | re.M
)


def test_the_schema_folder_holds_only_numbered_files_in_one_order() -> None:
    folder = sql_files() / "schema"
    names = sorted(entry.name for entry in folder.iterdir())
    # A stray file would be left out of the script without a word: there must be none.
    assert names == [name for name, _text in schema_files()]
    assert all(re.fullmatch(r"\d{2}_[a-z0-9_]+\.sql", name) for name in names), names
    numbers = [name[:2] for name in names]
    assert len(set(numbers)) == len(numbers), names
    # Tables first (the SQL functions and the view are checked against them when created),
    # the version rows last.
    assert names[0] == "00_tables.sql"
    assert names[-1] == "90_version.sql"
    assert schema_sql() == "\n".join(text for _name, text in schema_files())


def test_each_function_is_created_in_exactly_one_file() -> None:
    where: dict[str, list[str]] = {}
    for name, text in schema_files():
        for function in _CREATE_FUNCTION.findall(text):
            where.setdefault(function.lower(), []).append(name)
    assert len(where) > 40
    twice = {function: files for function, files in where.items() if len(files) > 1}
    assert twice == {}


def test_the_version_rows_are_the_migrations() -> None:
    """The fresh install records one row per migration, with the name that migration gives."""
    (version_file,) = [text for name, text in schema_files() if name == "90_version.sql"]
    rows = [
        (int(number), name)
        for number, name in re.findall(r"\(\s*(\d+)\s*,\s*'([^']*)'\s*\)", version_file)
    ]
    expected = []
    for migration in migrations():
        inserted = re.findall(
            r"INSERT INTO pgque_fifo\.schema_version \(version, name\) VALUES\s*"
            rf"\(\s*{migration.version}\s*,\s*'([^']*)'\s*\)",
            migration.sql,
        )
        assert len(inserted) == 1, migration.version
        expected.append((migration.version, inserted[0]))
    assert rows == expected
    assert rows[-1][0] == LATEST_VERSION
    # No other file writes a version row: the version is the script's last word.
    writers = [
        name for name, text in schema_files() if "INSERT INTO pgque_fifo.schema_version" in text
    ]
    assert writers == ["90_version.sql"]


#: Names whose previous version a migration keeps for a rolling upgrade (docs/postgres.md,
#: "Entry points through a rolling upgrade"): name -> the release whose migration drops it.
#: Empty while no release has been published.
KEPT_FOR_A_ROLLING_UPGRADE: dict[str, str] = {}


def test_the_schema_defines_one_version_of_each_function() -> None:
    """pgque_<name>_vN: a superseded version is dropped by a later migration, so the fresh
    install (and the migrations, which it matches) defines one version of each name, two only
    for a name kept through a rolling upgrade."""
    versions: dict[str, set[int]] = {}
    for function in _CREATE_FUNCTION.findall(schema_sql()):
        match = re.fullmatch(r"pgque_(\w+)_v(\d+)", function.lower())
        assert match is not None, f"{function} carries no version"
        versions.setdefault(match.group(1), set()).add(int(match.group(2)))
    assert {"claim", "nack", "stats", "redrive", "dead_letter", "dead_letters"} <= set(versions)
    several = {name: sorted(found) for name, found in versions.items() if len(found) > 1}
    assert set(several) == set(KEPT_FOR_A_ROLLING_UPGRADE), several
    assert all(len(found) == 2 for found in several.values()), several
