"""``auto.evolve``'s pure parts: which fields cannot be added, and the DDL it builds."""

from __future__ import annotations

import pytest
from psycopg import sql

from conveyor.api import ConnectError, Schema, SchemaType
from conveyor.connectors.postgres import evolve
from conveyor.connectors.postgres.config import load_config

INT64 = Schema(SchemaType.INT64)
OPT_STRING = Schema(SchemaType.STRING, optional=True)
REQ_INT_DEFAULT = Schema(SchemaType.INT32, default=7)
VALUE = Schema.struct(("id", INT64), ("note", OPT_STRING), ("qty", REQ_INT_DEFAULT), ("sku", Schema(SchemaType.STRING)))


def text(composable: sql.Composable) -> str:
    return composable.as_string(None)


def test_unaddable_fields_are_the_missing_required_ones_without_default() -> None:
    assert evolve.unaddable_fields(VALUE, {"id"}) == ["sku"]
    assert evolve.unaddable_fields(VALUE, {"id", "sku"}) == []
    assert evolve.unaddable_fields(VALUE, {"id"}, wanted={"id", "note"}) == [], "not written: not needed"
    assert evolve.unaddable_fields(None, set()) == []
    assert evolve.unaddable_fields(INT64, set()) == [], "not a struct"


def test_column_definitions_for_add_column() -> None:
    assert text(evolve.column_definition("note", OPT_STRING, table='"t"')) == '"note" text'
    assert text(evolve.column_definition("qty", REQ_INT_DEFAULT, table='"t"')) == '"qty" integer DEFAULT 7 NOT NULL'
    assert text(evolve.column_definition("seen", None, 1.5, table='"t"')) == '"seen" double precision'
    assert text(evolve.column_definition("nothing", None, None, table='"t"')) == '"nothing" text'


def test_required_field_without_default_is_refused_naming_table_and_field() -> None:
    with pytest.raises(ConnectError, match=r'column .sku. to table "shop"."orders".*required.*no default'):
        evolve.column_definition("sku", Schema(SchemaType.STRING), table='"shop"."orders"')


def test_create_table_definitions_need_no_default() -> None:
    assert text(evolve.column_definition("sku", Schema(SchemaType.STRING))) == '"sku" text NOT NULL'
    assert text(evolve.column_definition("k", None, "x", not_null=True)) == '"k" text NOT NULL'


def test_alter_statement_adds_if_not_exists() -> None:
    defs = [
        evolve.column_definition("note", OPT_STRING, table="t"),
        evolve.column_definition("n", Schema(SchemaType.INT64, optional=True), table="t"),
    ]
    assert text(evolve.add_columns_statement(sql.Identifier("shop", "orders"), defs)) == (
        'ALTER TABLE "shop"."orders" ADD COLUMN IF NOT EXISTS "note" text, ADD COLUMN IF NOT EXISTS "n" bigint'
    )
    with pytest.raises(ValueError):
        evolve.add_columns_statement(sql.Identifier("t"), [])


def test_auto_evolve_config_key() -> None:
    assert load_config({"connection.url": "postgresql://db/x"}).auto_evolve is False
    assert load_config({"connection.url": "postgresql://db/x", "auto.evolve": "true"}).auto_evolve is True
