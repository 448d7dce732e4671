"""Turning buffered sink records into SQL: table resolution, ``auto.create``, COPY, upsert, delete.

A write is two steps, both called from the task's thread:

1. :meth:`Writer.prepare` (outside any transaction): groups records by destination table,
   works out each table's columns (value schema fields, or the union of the dict keys of
   schemaless values), checks the table exists and has those columns (creating it when
   ``auto.create=true``, adding missing columns when ``auto.evolve=true``, see
   :mod:`.evolve`) and sets aside records that cannot be written (e.g. a value that
   is not a dict) as *rejects*.
2. :meth:`Writer.execute` (inside the caller's transaction): per table, ``insert`` mode
   streams the rows with ``COPY ... FROM STDIN``, building them chunk by chunk with
   whole-list ``map``/``itemgetter`` passes (little per-record Python work, and the
   server parses one chunk while the next is built); ``upsert`` mode keeps the last record of
   each primary key in the batch, COPYs those rows into a session temporary table and
   runs ``INSERT ... SELECT ... ON CONFLICT (pk) DO UPDATE``. Tombstones (with
   ``delete.enabled``) become ``DELETE ... WHERE pk = ...``, ordered correctly with
   respect to the rows of the same batch.

Speed: a schemaless batch whose dicts all have as many keys as the first is *assumed* to
have exactly its keys (checking every record's key set up front costs as much as building
the rows); should a record prove otherwise, :meth:`Writer.execute` raises
:class:`ShapeChanged`, the task rolls the transaction back and prepares the batch again
with every key set checked. Nothing is ever written with a column missing.

dict and list values are written as JSON (fit for ``json``/``jsonb`` or ``text`` columns);
values of Connect logical types are converted (see :mod:`.dialect`). Identifiers are always
quoted with :mod:`psycopg.sql`. psycopg errors propagate unchanged; the task maps them.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import JsonbDumper

from conveyor.api import ConnectError, Schema, SchemaType, SinkRecord
from conveyor.connectors.postgres import dialect, evolve
from conveyor.connectors.postgres.config import (
    PRIMITIVE_KEY_COLUMN,
    InsertMode,
    PkMode,
    PostgresSinkConfig,
    table_for_topic,
)
from conveyor.connectors.postgres.plan import KeyLayout, Plan, Rejects, Row, RowSource, ShapeChanged, Table, TableBatch

_NONE_TYPE = type(None)
_COORDINATE_SCHEMAS = (Schema(SchemaType.STRING), Schema(SchemaType.INT32), Schema(SchemaType.INT64))
"""The column types of ``pk.mode=kafka``'s topic, partition and offset (text, integer, bigint)."""
_value = attrgetter("value")
_key = attrgetter("key")
_topic = attrgetter("topic")
_value_schema = attrgetter("value_schema")


def _tuples(cols: Sequence[str], mappings: Sequence[Mapping[str, Any]]) -> list[Row]:
    """``[tuple(m[c] for c in cols) for m in mappings]`` at C speed; missing keys give
    ``None`` (through a slower path)."""
    try:
        if not cols:
            return [()] * len(mappings)
        if len(cols) == 1:
            return list(zip(map(itemgetter(cols[0]), mappings)))
        return list(map(itemgetter(*cols), mappings))
    except KeyError:
        return [tuple(map(m.get, cols)) for m in mappings]


def _pk_getter(indexes: Sequence[int]) -> Callable[[Row], Any]:
    return itemgetter(*indexes) if indexes else (lambda _row: ())


class Writer:
    """Writes batches of records for one task. Not thread-safe; used from the task's thread.

    Caches table metadata and temporary staging tables for the lifetime of one database
    session; call :meth:`reset` whenever the connection is replaced or a write failed.
    """

    def __init__(self, config: PostgresSinkConfig) -> None:
        self._config = config
        self._topic_tables: dict[str, tuple[str | None, str]] = {}
        self._tables: dict[tuple[str | None, str], Table] = {}
        self._stages: dict[tuple[str, tuple[str, ...]], sql.Identifier] = {}
        self._stage_seq = itertools.count(1)

    def reset(self) -> None:
        """Forget per-session caches (table columns, staging tables)."""
        self._tables.clear()
        self._stages.clear()

    def table_name(self, topic: str) -> tuple[str | None, str]:
        """``(schema or None, table)`` that ``table.name.format`` gives for ``topic``."""
        name = self._topic_tables.get(topic)
        if name is None:
            name = self._topic_tables[topic] = table_for_topic(self._config.table_name_format, topic)
        return name

    # -- step 1: prepare ------------------------------------------------------------------

    def prepare(self, conn: psycopg.Connection, records: Sequence[SinkRecord], *, trust_shape: bool = True) -> Plan:
        """Group ``records`` by table, resolve each table (creating it with ``auto.create``)
        and plan the rows.

        Must be called outside a transaction block (table creation and ``auto.evolve``'s
        ``ALTER TABLE`` commit on their own; inside one they become savepoints).
        With ``trust_shape`` a schemaless batch whose dicts all have the first one's size
        is assumed to have its keys; :meth:`execute` raises :class:`ShapeChanged` if not.

        Raises:
            ConnectError: a table is missing without ``auto.create`` or lacks columns (without
                ``auto.evolve``, or a key column ``auto.evolve`` cannot add).
            psycopg.Error: database errors, unchanged.
        """
        cfg = self._config
        if not cfg.delete_enabled and None in map(_value, records):
            records = [r for r in records if r.value is not None]  # skipped; offsets still advance
        topics = set(map(_topic, records))
        by_topic: dict[str, list[SinkRecord]]
        if len(topics) == 1:
            by_topic = {topics.pop(): list(records)}
        else:
            by_topic = {}
            for record in records:
                by_topic.setdefault(record.topic, []).append(record)

        by_table: dict[tuple[str | None, str], tuple[set[str], list[SinkRecord]]] = {}
        for topic, topic_records in by_topic.items():
            name = self.table_name(topic)
            entry = by_table.setdefault(name, (set(), []))
            entry[0].add(topic)
            entry[1].extend(topic_records)

        plan = Plan([], [])
        for name, (table_topics, table_records) in by_table.items():
            batch = self._prepare_table(conn, name, table_topics, table_records, plan.rejects, trust_shape)
            if batch is not None:
                plan.batches.append(batch)
        return plan

    def _prepare_table(
        self,
        conn: psycopg.Connection,
        name: tuple[str | None, str],
        topics: set[str],
        records: list[SinkRecord],
        rejects: Rejects,
        trust_shape: bool,
    ) -> TableBatch | None:
        cfg = self._config
        layout: KeyLayout | None = None
        if cfg.pk_mode is PkMode.RECORD_KEY:
            first_keyed = next((r for r in records if r.key is not None), None)
            layout = self._key_layout(first_keyed) if first_keyed is not None else KeyLayout((), False, {})
        elif cfg.pk_mode is PkMode.KAFKA:
            columns = cfg.kafka_pk_columns
            layout = KeyLayout(columns, False, dict(zip(columns, _COORDINATE_SCHEMAS, strict=True)), coordinates=True)
        records = self._valid(records, layout, rejects)
        if not records:
            return None
        has_tombstones = cfg.delete_enabled and None in map(_value, records)
        live = [r for r in records if r.value is not None] if has_tombstones else records

        key_cols = layout.columns if layout else ()
        pk_cols = key_cols if layout else tuple(cfg.pk_fields) if cfg.pk_mode is PkMode.RECORD_VALUE else ()
        table = self.table(conn, name)
        whitelist = set(cfg.fields_whitelist)
        if table is not None and cfg.auto_evolve:
            records = self._evolvable(conn, name, records, rejects, whitelist | set(pk_cols))
            if not records:
                return None
            table = self._tables.get(name, table)
            live = [r for r in records if r.value is not None] if has_tombstones else records
        # The one-shape assumption is only taken where a wrong guess is caught by execute():
        # every column written (no whitelist or key column filtered out), table exists.
        col_schemas, assumed = self._value_columns(live, trust_shape and table is not None)
        value_cols = self._select(col_schemas, key_cols, pk_cols, whitelist)
        if assumed and value_cols != tuple(col_schemas):
            col_schemas, assumed = self._value_columns(live, False)
            value_cols = self._select(col_schemas, key_cols, pk_cols, whitelist)
        columns = key_cols + value_cols
        if not columns:
            return None  # empty values and nothing to key them by

        if table is None:
            if not live:
                return None  # only tombstones for a table that does not exist: nothing to delete
            if not cfg.auto_create:
                raise ConnectError(
                    f"table {self._display(conn, name)} (for topic(s) {', '.join(sorted(topics))}) does not"
                    " exist; create it or set auto.create=true"
                )
            table = self._create_table(conn, name, live, layout, value_cols, col_schemas, pk_cols)
        missing = [col for col in columns if col not in table.columns]
        if missing:  # the cached column list may be stale (ALTER TABLE since): look again
            self._tables.pop(name, None)
            table = self.table(conn, name) or table
            missing = [col for col in columns if col not in table.columns]
        if missing and cfg.auto_evolve:
            schemas = {**col_schemas, **(layout.schemas if layout else {})}
            definitions = [
                evolve.column_definition(
                    col,
                    schema := schemas.get(col),
                    self._sample(live, col, col in key_cols) if schema is None else None,
                    table=table.display,
                )
                for col in missing
            ]
            evolve.add_columns(conn, table.ident, definitions, missing, self._config.ddl_lock_timeout_ms)
            self._tables.pop(name, None)  # re-read the columns
            table = self.table(conn, name) or table
            missing = [col for col in columns if col not in table.columns]
        if missing:
            raise ConnectError(
                f"table {table.display} has no column(s) {', '.join(missing)} for the records of topic(s)"
                f" {', '.join(sorted(topics))}; add them, or restrict the fields with fields.whitelist"
            )

        schemas = {**col_schemas, **(layout.schemas if layout else {})}
        converters = [
            (index, convert)
            for index, col in enumerate(columns)
            if (schema := schemas.get(col)) is not None and (convert := dialect.value_converter(schema)) is not None
        ]
        pk_of_row = _pk_getter([columns.index(col) for col in pk_cols])
        build = functools.partial(
            self._rows, layout=layout, value_cols=value_cols, converters=converters, strict=assumed
        )
        runs: list[tuple[bool, Any]]
        if live is records:
            runs = [(False, RowSource(live, build))]
        else:
            runs = []
            for is_delete, run in itertools.groupby(records, key=lambda r: r.value is None):
                group = list(run)
                if is_delete:
                    assert layout is not None  # delete.enabled implies pk.mode=record_key
                    keys = list(map(_key, group))
                    runs.append((True, list(map(itemgetter(*key_cols), keys)) if layout.is_struct else keys))
                else:
                    runs.append((False, RowSource(group, build)))
        return TableBatch(table, columns, pk_cols, runs, pk_of_row)

    @staticmethod
    def _select(
        col_schemas: dict[str, Schema | None], key_cols: tuple[str, ...], pk_cols: tuple[str, ...], whitelist: set[str]
    ) -> tuple[str, ...]:
        """The value columns to write: not a key column, and whitelisted (or part of the pk)."""
        for col in pk_cols:
            if col not in key_cols:
                col_schemas.setdefault(col, None)  # record_value: the pk always is a column
        return tuple(
            col for col in col_schemas if col not in key_cols and (not whitelist or col in whitelist or col in pk_cols)
        )

    def _evolvable(
        self,
        conn: psycopg.Connection,
        name: tuple[str | None, str],
        records: list[SinkRecord],
        rejects: Rejects,
        written: set[str],
    ) -> list[SinkRecord]:
        """``records`` without those whose value schema has a field that the table lacks
        and ``auto.evolve`` may not add (required, no default): those go to ``rejects``
        naming table and field. The table's columns are read again before rejecting (another
        task may have added them). ``written``: whitelisted and pk fields (empty = all)."""
        wanted = written if self._config.fields_whitelist else None
        table = self._tables[name]
        bad: dict[int, list[str]] = {}
        for schema in {id(s): s for s in map(_value_schema, records)}.values():
            if (fields := evolve.unaddable_fields(schema, table.columns, wanted)):
                bad[id(schema)] = fields
        if bad:
            self._tables.pop(name, None)
            table = self.table(conn, name) or table
            bad = {k: left for k, f in bad.items() if (left := [c for c in f if c not in table.columns])}
        if not bad:
            return records
        good = []
        for record in records:
            fields = bad.get(id(record.value_schema))
            if fields is None:
                good.append(record)
            else:
                rejects.append((record, (
                    f"table {table.display} has no column(s) {', '.join(fields)} and auto.evolve cannot add"
                    " them: required field(s) of the value schema without a default (existing rows would have"
                    " no value); make them optional or give them a default"
                )))
        return good

    def _valid(self, records: list[SinkRecord], layout: KeyLayout | None, rejects: Rejects) -> list[SinkRecord]:
        """``records`` without those that cannot become rows (added to ``rejects``) and
        without keyless tombstones. A fast whole-batch check first, per record only if needed."""
        value_types = set(map(type, map(_value, records)))
        ok = value_types <= {dict, _NONE_TYPE}
        if layout is not None and layout.coordinates:
            layout = None  # every record has a topic, partition and offset
        if ok and layout is not None:
            keys = list(map(_key, records))
            key_types = set(map(type, keys))
            if layout.is_struct:
                wanted = frozenset(layout.columns)
                ok = key_types == {dict} and all(map(wanted.issubset, keys))
            else:
                ok = _NONE_TYPE not in key_types and dict not in key_types
        if ok:
            return records
        good: list[SinkRecord] = []
        for record in records:
            value = record.value
            if value is not None and not isinstance(value, dict):
                rejects.append((record, f"value of type {type(value).__name__} is not a struct/dict"))
                continue
            if layout is not None:
                key = record.key
                if key is None:
                    if value is not None:
                        rejects.append((record, "pk.mode=record_key but the record key is null"))
                    continue  # a tombstone without a key deletes nothing
                if isinstance(key, dict) != layout.is_struct:
                    rejects.append((record, f"record key {key!r} does not match the batch's key shape"))
                    continue
                if layout.is_struct and any(col not in key for col in layout.columns):
                    rejects.append((record, f"record key lacks primary-key field(s) {', '.join(layout.columns)}"))
                    continue
            good.append(record)
        return good

    @staticmethod
    def _value_columns(live: list[SinkRecord], trust_shape: bool) -> tuple[dict[str, Schema | None], bool]:
        """Ordered ``{column: field schema or None}``: the fields of the STRUCT value
        schemas seen, then the keys of schemaless dicts (their union, in first-seen order).

        The flag is true when the columns are the first schemaless dict's keys *assumed*
        (``trust_shape``: every dict has the same size) rather than checked; rows must then
        be built strictly (see :meth:`_rows`).
        """
        cols: dict[str, Schema | None] = {}
        if not live:
            return cols, False
        if set(map(id, map(_value_schema, live))) != {id(None)}:
            schemaless = False
            for schema in {id(s): s for s in map(_value_schema, live)}.values():
                if schema is not None and schema.type is SchemaType.STRUCT:
                    for f in schema.fields:
                        if cols.get(f.name) is None:
                            cols[f.name] = f.schema
                else:
                    schemaless = True  # mixed: also take the union of the dict keys
            if not schemaless:
                return cols, False
        values = list(map(_value, live))
        first = values[0].keys()
        if not cols and len(set(map(len, values))) == 1:
            if trust_shape and first:
                return dict.fromkeys(first), True
            if all(map(first.__eq__, map(dict.keys, values))):
                return dict.fromkeys(first), False
        last: Any = None
        for value in values:
            keys = value.keys()
            if keys != last:
                for col in keys:
                    cols.setdefault(col, None)
                last = keys
        return cols, False

    @staticmethod
    def _rows(
        records: list[SinkRecord],
        layout: KeyLayout | None,
        value_cols: tuple[str, ...],
        converters: list[tuple[int, Callable[[Any], Any]]],
        strict: bool,
    ) -> list[Row]:
        """Row tuples (key columns, then value columns) for ``records``.

        Raises:
            ShapeChanged: ``strict`` and a value lacks one of ``value_cols`` (the batch's
                one-shape assumption was wrong).
        """
        values = list(map(_value, records))
        if strict:
            try:
                getter = itemgetter(*value_cols)
                rows = list(map(getter, values)) if len(value_cols) > 1 else list(zip(map(getter, values)))
            except KeyError:
                raise ShapeChanged from None
        else:
            rows = _tuples(value_cols, values)
        if layout is not None and layout.coordinates:
            key_rows = [(r.topic, r.kafka_partition, r.kafka_offset) for r in records]
            rows = list(map(operator.add, key_rows, rows))
        elif layout is not None and layout.columns:
            keys = list(map(_key, records))
            key_rows = _tuples(layout.columns, keys) if layout.is_struct else list(zip(keys))
            rows = list(map(operator.add, key_rows, rows))
        if converters:
            rows = [_convert(row, converters) for row in rows]
        return rows

    def _key_layout(self, record: SinkRecord) -> KeyLayout:
        """Key columns, whether the key is a struct, and key column schemas, from one record."""
        cfg = self._config
        key, key_schema = record.key, record.key_schema
        struct_schema = key_schema is not None and key_schema.type is SchemaType.STRUCT
        if isinstance(key, dict):
            if cfg.pk_fields:
                cols = tuple(cfg.pk_fields)
            elif struct_schema:
                cols = tuple(f.name for f in key_schema.fields)  # type: ignore[union-attr]
            else:
                cols = tuple(key)
            schemas = {f.name: f.schema for f in key_schema.fields} if struct_schema else {}  # type: ignore[union-attr]
            return KeyLayout(cols, True, schemas)
        if len(cfg.pk_fields) > 1:
            raise ConnectError(
                f"pk.fields names {len(cfg.pk_fields)} fields but the record keys of topic {record.topic!r}"
                " are primitives: name exactly one column"
            )
        col = cfg.pk_fields[0] if cfg.pk_fields else PRIMITIVE_KEY_COLUMN
        return KeyLayout((col,), False, {col: key_schema})

    # -- tables ---------------------------------------------------------------------------

    @staticmethod
    def _ident(name: tuple[str | None, str]) -> sql.Identifier:
        schema, table = name
        return sql.Identifier(schema, table) if schema else sql.Identifier(table)

    def _display(self, conn: psycopg.Connection, name: tuple[str | None, str]) -> str:
        return self._ident(name).as_string(conn)

    def cached_table(self, name: tuple[str | None, str]) -> Table | None:
        """The table's metadata if this session read it already (no query)."""
        return self._tables.get(name)

    def table(self, conn: psycopg.Connection, name: tuple[str | None, str]) -> Table | None:
        table = self._tables.get(name)
        if table is not None:
            return table
        display = self._display(conn, name)
        oid = conn.execute("SELECT to_regclass(%s)::oid", (display,)).fetchone()[0]  # type: ignore[index]
        if oid is None:
            return None
        rows = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        ).fetchall()
        table = self._tables[name] = Table(self._ident(name), display, dict(rows))
        return table

    def _create_table(
        self,
        conn: psycopg.Connection,
        name: tuple[str | None, str],
        live: list[SinkRecord],
        layout: KeyLayout | None,
        value_cols: tuple[str, ...],
        col_schemas: dict[str, Schema | None],
        pk_cols: tuple[str, ...],
    ) -> Table:
        """``CREATE TABLE IF NOT EXISTS`` from schemas or sampled values, in its own
        transaction, serialized between tasks by an advisory lock on the table name."""
        key_cols = layout.columns if layout else ()
        defs: list[sql.Composable] = []
        for col in key_cols + value_cols:
            from_key = col in key_cols
            schema = layout.schemas.get(col) if from_key and layout else col_schemas.get(col)
            sample = self._sample(live, col, from_key) if schema is None else None
            defs.append(evolve.column_definition(col, schema, sample, not_null=col in pk_cols))
        if pk_cols:
            defs.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, pk_cols))))
        ident = self._ident(name)
        with conn.transaction():
            evolve.lock_table_ddl(conn, ident, self._config.ddl_lock_timeout_ms)
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(ident, sql.SQL(", ").join(defs)))
        table = self.table(conn, name)
        assert table is not None
        return table

    def _sample(self, records: Iterable[SinkRecord], col: str, from_key: bool) -> Any:
        """The first non-null value of ``col`` among ``records`` (``None`` if there is none)."""
        for record in records:
            if from_key:
                key = record.key
                value = key.get(col) if isinstance(key, dict) else key
            else:
                value = record.value.get(col) if record.value is not None else None
            if value is not None:
                return value
        return None

    # -- step 2: execute ------------------------------------------------------------------

    def execute(self, cur: psycopg.Cursor, plan: Plan) -> None:
        """Write ``plan`` with ``cur``, which must be inside the caller's transaction."""
        cur.adapters.register_dumper(dict, JsonbDumper)
        cur.adapters.register_dumper(list, JsonbDumper)
        staged = self._config.insert_mode is not InsertMode.INSERT
        for batch in plan.batches:
            if staged:
                self._upsert(cur, batch)
            else:
                self._insert(cur, batch)

    def _copy(
        self, cur: psycopg.Cursor, target: sql.Composable, cols: tuple[str, ...], chunks: Iterable[list[Row]]
    ) -> None:
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(target, sql.SQL(", ").join(map(sql.Identifier, cols)))
        with cur.copy(statement) as copy:
            write_row = copy.write_row
            for rows in chunks:
                for row in rows:
                    write_row(row)

    def _insert(self, cur: psycopg.Cursor, batch: TableBatch) -> None:
        for is_delete, items in batch.runs:
            if is_delete:
                self._delete(cur, batch, items)
            else:
                self._copy(cur, batch.table.ident, batch.columns, items.chunks())

    def _upsert(self, cur: psycopg.Cursor, batch: TableBatch) -> None:
        # The last operation on each key wins: an upsert (its row) or a delete (None).
        last: dict[Any, Row | None] = {}
        try:
            for is_delete, items in batch.runs:
                if is_delete:
                    last.update(dict.fromkeys(items))
                else:
                    rows = items.all()
                    last.update(zip(map(batch.pk_of_row, rows), rows, strict=True))
        except TypeError as exc:  # an unhashable key value (e.g. a dict inside the key)
            raise ConnectError(
                f"a primary-key value for table {batch.table.display} is not a primitive: {exc}"
            ) from None
        deletes = [key for key, row in last.items() if row is None]
        if deletes:
            self._delete(cur, batch, deletes)
        rows = [row for row in last.values() if row is not None]
        if not rows:
            return
        cols = batch.columns
        stage = self.stage(cur, batch.table, cols)
        self._copy(cur, stage, cols, [rows])
        self.merge(cur, batch.table, cols, batch.pk, stage)

    def merge(self, cur: psycopg.Cursor, table: Table, cols: tuple[str, ...], pk: tuple[str, ...],
              stage: sql.Identifier) -> None:
        """Write the rows of ``stage`` into ``table`` on their ``pk``: ``upsert``
        ``INSERT ... ON CONFLICT (pk) DO UPDATE`` (``DO NOTHING`` when every column is in
        ``pk``); ``update`` ``UPDATE ... FROM`` the stage, so rows whose key is not in the
        table are not written (nothing to do when every column is in ``pk``)."""
        col_list = sql.SQL(", ").join(map(sql.Identifier, cols))
        updates = [c for c in cols if c not in pk]
        if self._config.insert_mode is InsertMode.UPDATE:
            if updates:
                cur.execute(sql.SQL("UPDATE {} AS t SET {} FROM {} AS s WHERE {}").format(
                    table.ident,
                    sql.SQL(", ").join(sql.SQL("{0} = s.{0}").format(sql.Identifier(c)) for c in updates),
                    stage,
                    sql.SQL(" AND ").join(sql.SQL("t.{0} = s.{0}").format(sql.Identifier(c)) for c in pk)))
            return
        if updates:
            action = sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updates)
            )
        else:
            action = sql.SQL("DO NOTHING")
        cur.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT ({}) {}").format(
                table.ident,
                col_list,
                col_list,
                stage,
                sql.SQL(", ").join(map(sql.Identifier, pk)),
                action,
            )
        )

    def stage(self, cur: psycopg.Cursor, table: Table, cols: tuple[str, ...]) -> sql.Identifier:
        """A session temporary table with ``cols`` typed as in ``table``, emptied at every
        commit (``ON COMMIT DELETE ROWS``). Created at most once per session and column set;
        creating it inside the caller's transaction is fine because a failed write resets
        the cache."""
        key = (table.display, cols)
        stage = self._stages.get(key)
        if stage is None:
            stage = sql.Identifier(f"conveyor_stage_{next(self._stage_seq)}")
            cur.execute(
                sql.SQL(
                    "CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DELETE ROWS AS SELECT {} FROM {} WITH NO DATA"
                ).format(stage, sql.SQL(", ").join(map(sql.Identifier, cols)), table.ident)
            )
            self._stages[key] = stage
        return stage

    def _delete(self, cur: psycopg.Cursor, batch: TableBatch, keys: list[Any]) -> None:
        if not keys:
            return
        condition = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(c)) for c in batch.pk)
        params = list(zip(keys)) if len(batch.pk) == 1 else keys
        cur.executemany(sql.SQL("DELETE FROM {} WHERE {}").format(batch.table.ident, condition), params)


def _convert(row: Row, converters: list[tuple[int, Callable[[Any], Any]]]) -> Row:
    out = list(row)
    for index, convert in converters:
        if out[index] is not None:
            out[index] = convert(out[index])
    return tuple(out)
