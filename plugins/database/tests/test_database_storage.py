"""Physical storage: one table per schema, a generated column and index per single-valued field, kept in
step with schema changes; the list route's filters and sorts are served by those indexes."""

from sqlalchemy import event, inspect, text

from trellis import db


def table_of(record):
    return f"dbdoc_{record['_id']}"


def columns_and_indexes(record):
    inspector = inspect(db.session.connection())
    table = table_of(record)
    columns = {c["name"] for c in inspector.get_columns(table)}
    indexes = {tuple(i["column_names"]): bool(i["unique"]) for i in inspector.get_indexes(table)}
    return columns, indexes


def test_columns_and_indexes_follow_the_fields(dbapi):
    record = dbapi.create_schema(
        "Gear",
        {
            "name": {"type": "String", "unique": True},
            "weight": "Number",
            "tags": ["String"],
            "spec": "JSON",
            "note": {"type": "String", "index": False},
        },
    )
    columns, indexes = columns_and_indexes(record)
    assert {"id", "data", "created_at", "updated_at", "version", "f_name", "f_weight", "f_note"} <= columns
    assert "f_tags" not in columns and "f_spec" not in columns
    assert indexes[("f_name",)] is True  # unique
    assert indexes[("f_weight", "id")] is False
    assert ("created_at", "id") in indexes
    assert not any(cols[0] == "f_note" for cols in indexes)
    dbapi.post("Gear", {"name": "rope", "weight": 2})
    dbapi.update_schema(record["_id"], fields={"name": "String", "weight": "String", "colour": "String"})
    columns, indexes = columns_and_indexes(record)
    assert "f_note" not in columns and "f_colour" in columns
    assert indexes[("f_name", "id")] is False  # no longer unique
    assert ("f_colour", "id") in indexes
    dbapi.post("Gear", {"name": "rope", "weight": "heavy"})  # duplicates allowed now; weight is text
    assert dbapi.list("Gear", "weight=heavy")["count"] == 1


def _captured_list_query(app, dbapi, query):
    engine = app.extensions["trellis"].engine
    seen = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if "dbdoc_" in statement and not statement.lstrip().lower().startswith("select count("):  # the page
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        dbapi.list("Item", query)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return seen[0]


def test_filtered_sorted_list_is_served_by_the_field_index(app, dbapi):
    dbapi.create_schema("Item", {"price": "Number", "title": "String"})
    dbapi.many("Item", [{"price": i % 50, "title": f"t{i}"} for i in range(200)])
    statement, parameters = _captured_list_query(app, dbapi, "price[$lt]=10&sort=-price&limit=20")
    connection = db.session.connection()
    if connection.dialect.name == "postgresql":
        connection.execute(text("SET LOCAL enable_seqscan = off"))  # tiny table: show the index is usable
        plan = "\n".join(r[0] for r in connection.exec_driver_sql("EXPLAIN " + statement, parameters))
        assert "Index Scan Backward using dbix_" in plan, plan
        assert "Sort" not in plan.split("Index Scan")[0].replace("Incremental Sort", ""), plan
    else:
        plan = "\n".join(str(r[-1]) for r in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
        assert "USING INDEX dbix_" in plan and "TEMP B-TREE" not in plan, plan
    assert [d["price"] for d in dbapi.list("Item", "price[$lt]=10&sort=-price&limit=3")["documents"]] == [9, 9, 9]


def test_text_sorts_by_index_too(app, dbapi):
    dbapi.create_schema("Item", {"price": "Number", "title": "String"})
    dbapi.many("Item", [{"title": f"t{i:03d}"} for i in range(100)])
    statement, parameters = _captured_list_query(app, dbapi, "title[$gte]=t050&sort=title&limit=5")
    connection = db.session.connection()
    if connection.dialect.name == "postgresql":
        connection.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(r[0] for r in connection.exec_driver_sql("EXPLAIN " + statement, parameters))
        assert "Index Scan using dbix_" in plan, plan
    else:
        plan = "\n".join(str(r[-1]) for r in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
        assert "USING INDEX dbix_" in plan, plan
