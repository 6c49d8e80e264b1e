"""ClickHouse decodes OTLP trace requests itself: the SQL of store_side_decoding.py's path (c).

The consumer would send each record's bytes as they came, framed in an ``Envelope``
(otlp_trace_bounded.proto), with ``FORMAT Protobuf`` into a Null table; materialized
views turn them into the rows guardtrace's Python decoder writes today:

    otlp_trace_in (Null) --flatten--> otlp_trace_checked (Null: per record, a verdict and
                                      one array per column of its span and event rows)
        --spans-->    spans              (verdict '')
        --events-->   span_events        (verdict '')
        --rejects-->  otlp_trace_rejects (verdict not '': the consumer reads these back
                                          and decodes them in Python: too deep, or poison)

The verdict is computed once per record, so a record is written whole by the SQL or
whole by Python, never half by each. No expression may throw for any record: one that
throws fails the whole insert, as a record ClickHouse cannot parse does.

Text conventions copied from consumers/otlp_values.py (any_value_text): strings as they
are, booleans ``true``/``false``, integers in decimal, doubles as Python's ``repr``,
bytes as lowercase hex, arrays and kvlists as ``json.dumps(..., ensure_ascii=False)``, an
empty value as ``null``; a key given twice keeps its first position and its last value
(a Python dict).

Event ids: today's (``blake2b(digest_size=16)`` of ``trace:span:index:time:name``,
consumers/otlp_values.py) cannot be computed here: ClickHouse has no BLAKE2b (nor
BLAKE3 in chDB's build), and an unrolled SQL BLAKE2b costs seconds of query analysis at
every insert (_blake2b_sql.py). The views use the first 16 bytes of SHA-256 of the same
text instead (:data:`EVENT_ID_HASH`); Python computes the same with ``hashlib.sha256``.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from guardtrace.schemas import names

PROTO_PATH = Path(__file__).with_name("otlp_trace_bounded.proto")
ENVELOPE_MESSAGE = "Envelope"

IN_TABLE = "otlp_trace_in"
CHECKED_TABLE = "otlp_trace_checked"
REJECTS_TABLE = "otlp_trace_rejects"

# Verdicts (the otlp_trace_rejects.verdict column); '' means the SQL writes the record.
TOO_DEEP = "too deep"
NO_SPANS = "no spans"
INVALID_IDS = "invalid ids"
TIME_OUT_OF_RANGE = "time out of range"
INVALID_UTF8 = "invalid utf-8"

# The text each view hashes for an event id, and the hash: the first 16 bytes of SHA-256,
# as 32 lowercase hex digits (store_side_decoding.py computes the same in Python).
EVENT_ID_HASH = "sha256/128"

# DateTime64(9) holds nanoseconds in an Int64 (consumers/otlp_values.py MAX_TIME_NS).
_MAX_TIME_NS = 2**63 - 1

_WHICH = ("Enum8('none' = 0, 'string_value' = 1, 'bool_value' = 2, 'int_value' = 3, "
          "'double_value' = 4, 'array_value' = 5, 'kvlist_value' = 6, 'bytes_value' = 7)")
_SCALARS = ("string_value String, bool_value Bool, int_value Int64, double_value Float64, "
            "bytes_value String")
# AnyValue1: scalars; a container at this depth is kept as raw bytes (too deep).
_ANY_VALUE_1 = f"Tuple(which {_WHICH}, {_SCALARS}, array_value String, kvlist_value String)"
_ANY_VALUE = (f"Tuple(which {_WHICH}, {_SCALARS}, array_value Tuple(values Array({_ANY_VALUE_1})), "
              f"kvlist_value Tuple(values Array(Tuple(key String, value {_ANY_VALUE_1}))))")
_KEY_VALUES = f"Array(Tuple(key String, value {_ANY_VALUE}))"
_SPAN = (f"Tuple(trace_id String, span_id String, parent_span_id String, name String, "
         f"kind Int32, start_time_unix_nano UInt64, end_time_unix_nano UInt64, "
         f"attributes {_KEY_VALUES}, "
         f"events Array(Tuple(time_unix_nano UInt64, name String, attributes {_KEY_VALUES})), "
         f"status Tuple(message String, code Int32))")
_REQUEST = (f"Tuple(resource_spans Array(Tuple(resource Tuple(attributes {_KEY_VALUES}), "
            f"scope_spans Array(Tuple(scope Tuple(name String), spans Array({_SPAN}))))))")
# The columns of the Envelope message, matched by name (ClickHouse's Protobuf format).
ENVELOPE_COLUMNS = f"batch UInt64, record UInt32, request {_REQUEST}"


def insert_settings(proto_text: str) -> dict[str, str | int]:
    """Settings of an ``INSERT ... FORMAT Protobuf`` of length-delimited Envelopes."""
    return {"format_schema_source": "string", "format_schema": proto_text,
            "format_schema_message_name": ENVELOPE_MESSAGE,
            "input_format_protobuf_oneof_presence": 1}


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# json.dumps(s, ensure_ascii=False) of a control character: the short escapes, else \u00xx
# (lowercase hex). Indexed by the character's code + 1.
_CONTROL_ESCAPES = "[" + ", ".join(
    _sql_string({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(code, f"\\u{code:04x}"))
    for code in range(32)) + "]"

# SQL user-defined functions (lambdas). ClickHouse expands each call in place, copying
# its arguments' text at every use of a parameter, and analyzes the views' SQL again at
# every insert; so where an argument is used several times it is bound once through a
# one-element array (``arrayMap((d, p) -> ..., [digits], [point])[1]``, a "let"), and a
# parameter's tuple fields are read with tupleElement (a parameter written ``v.which`` is
# not substituted). The names are global to the engine, hence the prefix.
FUNCTIONS = {
    # A JSON string literal as json.dumps(s, ensure_ascii=False) writes it: only '"', '\'
    # and control characters are escaped (ClickHouse's toJSONString also escapes '/' and
    # U+2028/9, and writes \u001B in capitals). The byte-by-byte path runs only where the
    # string holds one of them; UTF-8 sequences pass through untouched (bytes >= 0x80).
    "gtb_json_str": (
        "(js_s) -> concat('\"', if(match(js_s, '[\\\\x00-\\\\x1f\"\\\\\\\\]'), "
        "arrayStringConcat(arrayMap(js_c -> multiIf(js_c = '\"', '\\\\\"', js_c = '\\\\', '\\\\\\\\', "
        f"reinterpretAsUInt8(js_c) < 32, {_CONTROL_ESCAPES}[reinterpretAsUInt8(js_c) + 1], js_c), "
        "splitByRegexp('', js_s))), js_s), '\"')"),
    # Python's repr of a finite double, laid out from ClickHouse's shortest round-trip
    # digits (toString, the same digits as repr): d the significant digits, p where the
    # decimal point goes after the first p of them. Fixed notation for decimal exponents
    # -4..15 (".0" when integral), else d.ddde+XX.
    "gtb_layout": (
        "(lay_d, lay_p) -> multiIf(lay_d = '', '0.0', lay_p - 1 < -4 OR lay_p - 1 >= 16, "
        "concat(substring(lay_d, 1, 1), if(length(lay_d) > 1, concat('.', substring(lay_d, 2)), ''), 'e', "
        "if(lay_p - 1 < 0, '-', '+'), if(abs(lay_p - 1) < 10, '0', ''), toString(abs(lay_p - 1))), "
        "lay_p <= 0, concat('0.', repeat('0', toUInt32(greatest(0, -lay_p))), lay_d), "
        "lay_p >= length(lay_d), concat(lay_d, repeat('0', toUInt32(greatest(0, lay_p - length(lay_d)))), '.0'), "
        "concat(substring(lay_d, 1, greatest(lay_p, 0)), '.', substring(lay_d, greatest(lay_p, 0) + 1)))"),
    # toString's "123.45", "0.00001" or "1.5e300" -> (digits without leading and trailing
    # zeros, point position) -> gtb_layout.
    "gtb_repr_digits": (
        "(rd_s) -> arrayMap((rd_mantissa, rd_exponent) -> arrayMap((rd_all, rd_significant) -> "
        "arrayMap((rd_d, rd_p) -> gtb_layout(rd_d, rd_p), "
        "[replaceRegexpOne(rd_significant, '0+$', '')], "
        "[toInt32(length(splitByChar('.', rd_mantissa)[1])) + rd_exponent "
        "- toInt32(length(rd_all) - length(rd_significant))])[1], "
        "[replaceOne(rd_mantissa, '.', '')], "
        "[replaceRegexpOne(replaceOne(rd_mantissa, '.', ''), '^0+', '')])[1], "
        "[splitByChar('e', rd_s)[1]], [toInt32OrZero(splitByChar('e', rd_s)[2])])[1]"),
    "gtb_repr_finite": ("(rf_x) -> concat(if(rf_x < 0 OR (rf_x = 0 AND 1 / rf_x < 0), '-', ''), "
                        "gtb_repr_digits(toString(abs(rf_x))))"),
    "gtb_repr": ("(r_x) -> multiIf(isNaN(r_x), 'nan', isInfinite(r_x), if(r_x > 0, 'inf', '-inf'), "
                 "gtb_repr_finite(r_x))"),
    "gtb_json_float": ("(jf_x) -> multiIf(isNaN(jf_x), 'NaN', isInfinite(jf_x), "
                       "if(jf_x > 0, 'Infinity', '-Infinity'), gtb_repr_finite(jf_x))"),
    # An AnyValue1 (a scalar inside an array or kvlist) as JSON (_any_value_json); a
    # container here makes the record too deep, so its text is never written.
    "gtb_json_1": (
        "(j1_v) -> multiIf(tupleElement(j1_v, 'which') = 'string_value', "
        "gtb_json_str(tupleElement(j1_v, 'string_value')), "
        "tupleElement(j1_v, 'which') = 'int_value', toString(tupleElement(j1_v, 'int_value')), "
        "tupleElement(j1_v, 'which') = 'bool_value', "
        "if(tupleElement(j1_v, 'bool_value'), 'true', 'false'), "
        "tupleElement(j1_v, 'which') = 'double_value', "
        "gtb_json_float(tupleElement(j1_v, 'double_value')), "
        "tupleElement(j1_v, 'which') = 'bytes_value', "
        "concat('\"', lower(hex(tupleElement(j1_v, 'bytes_value'))), '\"'), 'null')"),
    # A key given twice: first position, last value (a dict built key by key).
    "gtb_last_values": ("(lv_ks, lv_vs) -> arrayMap(lv_k -> lv_vs[length(lv_ks) + 1 - "
                        "indexOf(arrayReverse(lv_ks), lv_k)], arrayDistinct(lv_ks))"),
    "gtb_json_object": (
        "(jo_ks, jo_vs) -> concat('{', arrayStringConcat(arrayMap((jo_k, jo_v) -> "
        "concat(gtb_json_str(jo_k), ': ', jo_v), arrayDistinct(jo_ks), gtb_last_values(jo_ks, jo_vs)), "
        "', '), '}')"),
    # An attribute's value as the text stored in the Map (any_value_text).
    "gtb_text": (
        "(t_v) -> multiIf(tupleElement(t_v, 'which') = 'string_value', "
        "tupleElement(t_v, 'string_value'), "
        "tupleElement(t_v, 'which') = 'int_value', toString(tupleElement(t_v, 'int_value')), "
        "tupleElement(t_v, 'which') = 'bool_value', "
        "if(tupleElement(t_v, 'bool_value'), 'true', 'false'), "
        "tupleElement(t_v, 'which') = 'double_value', gtb_repr(tupleElement(t_v, 'double_value')), "
        "tupleElement(t_v, 'which') = 'bytes_value', lower(hex(tupleElement(t_v, 'bytes_value'))), "
        "tupleElement(t_v, 'which') = 'array_value', concat('[', arrayStringConcat(arrayMap("
        "t_x -> gtb_json_1(t_x), tupleElement(tupleElement(t_v, 'array_value'), 'values')), ', '), ']'), "
        "tupleElement(t_v, 'which') = 'kvlist_value', arrayMap(t_pairs -> gtb_json_object("
        "arrayMap(t_kv -> t_kv.key, t_pairs), arrayMap(t_kv -> gtb_json_1(t_kv.value), t_pairs)), "
        "[tupleElement(tupleElement(t_v, 'kvlist_value'), 'values')])[1], 'null')"),
    # Keys and texts as the Map the decoder builds (attributes_map, a dict).
    "gtb_map": ("(m_ks, m_texts) -> if(length(arrayDistinct(m_ks)) = length(m_ks), "
                "mapFromArrays(m_ks, m_texts), "
                "mapFromArrays(arrayDistinct(m_ks), gtb_last_values(m_ks, m_texts)))"),
    "gtb_get": "(g_m, g_key, g_default) -> if(mapContains(g_m, g_key), g_m[g_key], g_default)",
    "gtb_hex": "(h_b) -> lower(hex(h_b))",
    "gtb_time": "(tm_ns) -> fromUnixTimestamp64Nano(toInt64(tm_ns), 'UTC')",
    # The SPAN_KINDS and STATUS names of consumers/otlp_values.py; other codes as numbers.
    "gtb_kind": ("(kd_k) -> transform(kd_k, [0, 1, 2, 3, 4, 5], ['unspecified', 'internal', "
                 "'server', 'client', 'producer', 'consumer'], toString(kd_k))"),
    "gtb_status": "(st_c) -> transform(st_c, [0, 1, 2], ['unset', 'ok', 'error'], toString(st_c))",
    "gtb_event_id": ("(ei_trace, ei_span, ei_index, ei_time, ei_name) -> lower(hex(substring(SHA256(concat("
                     "ei_trace, ':', ei_span, ':', toString(ei_index), ':', toString(ei_time), ':', ei_name)), "
                     "1, 16)))"),
}


# The checked table: per record, one array per column of the span and event rows (the
# views only ARRAY JOIN them).
_CHECKED_ARRAYS = (
    ("span_scope", "String"), ("span_maps", "Map(String, String)"),
    ("span_resource_maps", "Map(String, String)"), ("span_service", "String"),
    ("event_maps", "Map(String, String)"), ("event_index", "UInt32"), ("event_span", "UInt32"),
    ("span_trace", "String"), ("span_span_id", "String"), ("span_parent", "String"),
    ("span_name", "String"), ("span_kind", "String"), ("span_start", "UInt64"),
    ("span_end", "UInt64"), ("span_status_code", "String"), ("span_status_message", "String"),
    ("span_request_id", "String"), ("span_module", "String"), ("event_time", "UInt64"),
    ("event_name", "String"), ("event_trace", "String"), ("event_span_id", "String"),
    ("event_service", "String"), ("event_span_request_id", "String"),
    ("event_span_module", "String"),
)


def _flat(path: str) -> str:
    return f"arrayFlatten({path})"


def _verdict() -> str:
    """The record's verdict: '' (the SQL writes it) or why Python must look at it, in the
    order decode_spans checks (a protobuf parse with UTF-8 validation, ids, no spans,
    times), then depth."""
    spans = "request.resource_spans.scope_spans.spans"
    resource_kvs = "request.resource_spans.resource.attributes"
    span_kvs = f"{spans}.attributes"
    event_kvs = f"{spans}.events.attributes"
    kv_sites = (resource_kvs, span_kvs, event_kvs)
    strings = [f"{spans}.name", f"{spans}.events.name", f"{spans}.status.message",
               "request.resource_spans.scope_spans.scope.name"]
    for site in kv_sites:
        strings += [f"{site}.key", f"{site}.value.string_value",
                    f"{site}.value.array_value.values.string_value",
                    f"{site}.value.kvlist_value.values.key",
                    f"{site}.value.kvlist_value.values.value.string_value"]
    deep = [f"{site}.value.{container}.which" for site in kv_sites
            for container in ("array_value.values", "kvlist_value.values.value")]
    times = [f"{spans}.start_time_unix_nano", f"{spans}.end_time_unix_nano",
             f"{spans}.events.time_unix_nano"]
    utf8 = " OR ".join(f"NOT arrayAll(s -> isValidUTF8(s), {_flat(s)})" for s in strings)
    ids = (f"arrayExists(x -> length(x) != 16, {_flat(spans + '.trace_id')}) OR "
           f"arrayExists(x -> length(x) != 8, {_flat(spans + '.span_id')})")
    late = " OR ".join(f"arrayExists(t -> t > {_MAX_TIME_NS}, {_flat(t)})" for t in times)
    too_deep = " OR ".join(
        f"arrayExists(w -> w IN ('array_value', 'kvlist_value'), {_flat(d)})" for d in deep)
    return (f"multiIf({utf8}, '{INVALID_UTF8}', {ids}, '{INVALID_IDS}', "
            f"length({_flat(spans + '.trace_id')}) = 0, '{NO_SPANS}', "
            f"{late}, '{TIME_OUT_OF_RANGE}', {too_deep}, '{TOO_DEEP}', '')")


def function_statements() -> list[str]:
    return [f"CREATE FUNCTION IF NOT EXISTS {name} AS {body}" for name, body in FUNCTIONS.items()]


# The views, by name; store_side_decoding.py also times the chain with only some of them.
SPANS_VIEW, EVENTS_VIEW, REJECTS_VIEW, FLATTEN_VIEW = "spans", "events", "rejects", "flatten"
VIEWS = (SPANS_VIEW, EVENTS_VIEW, REJECTS_VIEW, FLATTEN_VIEW)


def view_statements(database: str, views: Collection[str] = VIEWS) -> list[str]:
    """The Null tables, the rejects table and ``views``, in ``database`` (migrated).

    The record-level view flattens each request once: its spans and events into arrays,
    and every attribute of the record (resources', spans', events') into one array of
    keys and one of texts, converted by a single expansion of gtb_text (each expansion
    costs analysis time at every insert), then cut back into one Map per resource, span
    and event. The span and event views only ARRAY JOIN those arrays.
    """
    db = database
    request_id, module = names.ATTR_REQUEST_ID, names.ATTR_MODULE
    agent, hallucinated, tier = (names.ATTR_AGENT, names.ATTR_HALLUCINATED_AGENT,
                                 names.ATTR_TIER)
    rs = "request.resource_spans"
    # Per record, in order: the resources' attribute lists, the spans', the events'.
    flatten = f"""
        SELECT batch, record, verdict, spans, events, event_span, event_index, span_resource,
               span_scope, resources, attribute_lists, all_kvs,
               arrayMap(kv -> kv.key, all_kvs) AS all_keys,
               arrayMap(kv -> gtb_text(kv.value), all_kvs) AS all_texts
        FROM (
            SELECT batch, record, verdict, spans, events, event_span, event_index,
                   span_resource, span_scope, length({rs}) AS resources,
                   arrayConcat(arrayMap(r -> length(r), {rs}.resource.attributes),
                               arrayMap(sp -> length(sp.attributes), spans),
                               arrayMap(ev -> length(ev.attributes), events))
                       AS attribute_lists,
                   arrayConcat(arrayFlatten({rs}.resource.attributes),
                               arrayFlatten(spans.attributes),
                               arrayFlatten(events.attributes)) AS all_kvs
            FROM (
                SELECT batch, record, request, {_verdict()} AS verdict,
                       arrayFlatten({rs}.scope_spans.spans) AS spans,
                       arrayFlatten(spans.events) AS events,
                       arrayFlatten(arrayMap((sp, n) -> arrayResize([n], length(sp.events), n),
                                             spans, arrayEnumerate(spans))) AS event_span,
                       arrayFlatten(arrayMap(sp -> arrayEnumerate(sp.events), spans))
                           AS event_index,
                       arrayFlatten(arrayMap((r, n) -> arrayFlatten(arrayMap(
                           ss -> arrayResize([n], length(ss.spans), n), r.scope_spans)),
                           {rs}, arrayEnumerate({rs}))) AS span_resource,
                       arrayFlatten(arrayMap(r -> arrayFlatten(arrayMap(
                           ss -> arrayResize([ss.scope.name], length(ss.spans), ss.scope.name),
                           r.scope_spans)), {rs})) AS span_scope
                FROM {db}.{IN_TABLE}))"""
    tables = [
        f"CREATE TABLE {db}.{IN_TABLE} ({ENVELOPE_COLUMNS}) ENGINE = Null",
        f"""CREATE TABLE {db}.{CHECKED_TABLE} (
                batch UInt64, record UInt32, verdict String,
                {', '.join(f'{name} Array({kind})' for name, kind in _CHECKED_ARRAYS)}
            ) ENGINE = Null""",
        f"CREATE TABLE {db}.{REJECTS_TABLE} (batch UInt64, record UInt32, verdict String) "
        "ENGINE = MergeTree ORDER BY (batch, record)"]
    # Targets first, then the views that feed them: nothing passes before all exist.
    statements = {
        SPANS_VIEW: f"""CREATE MATERIALIZED VIEW {db}.otlp_spans_mv TO {db}.spans AS
            SELECT trace_id, span_id, parent_span_id, name, kind, service, scope_name,
                   gtb_time(start) AS start_time, gtb_time(end) AS end_time,
                   if(end > start, end - start, 0) AS duration_ns, status_code, status_message,
                   attributes['{request_id}'] AS request_id, attributes, resource_attributes
            FROM {db}.{CHECKED_TABLE}
            ARRAY JOIN span_trace AS trace_id, span_span_id AS span_id,
                       span_parent AS parent_span_id, span_name AS name, span_kind AS kind,
                       span_service AS service, span_scope AS scope_name, span_start AS start,
                       span_end AS end, span_status_code AS status_code,
                       span_status_message AS status_message, span_maps AS attributes,
                       span_resource_maps AS resource_attributes
            WHERE verdict = ''""",
        EVENTS_VIEW: f"""CREATE MATERIALIZED VIEW {db}.otlp_span_events_mv TO {db}.span_events AS
            SELECT gtb_event_id(trace_id, span_id, index - 1, time, name) AS event_id,
                   gtb_time(time) AS timestamp, name, trace_id, span_id,
                   gtb_get(attributes, '{request_id}', span_request_id) AS request_id,
                   gtb_get(attributes, '{module}', span_module) AS module,
                   gtb_get(attributes, '{agent}', attributes['{hallucinated}']) AS agent,
                   attributes['{tier}'] AS tier, service, attributes
            FROM {db}.{CHECKED_TABLE}
            ARRAY JOIN event_time AS time, event_name AS name, event_index AS index,
                       event_trace AS trace_id, event_span_id AS span_id,
                       event_service AS service, event_span_request_id AS span_request_id,
                       event_span_module AS span_module, event_maps AS attributes
            WHERE verdict = ''""",
        REJECTS_VIEW: f"CREATE MATERIALIZED VIEW {db}.otlp_rejects_mv TO {db}.{REJECTS_TABLE} AS "
        f"SELECT batch, record, verdict FROM {db}.{CHECKED_TABLE} WHERE verdict != ''",
        FLATTEN_VIEW: f"""CREATE MATERIALIZED VIEW {db}.otlp_flatten_mv TO {db}.{CHECKED_TABLE} AS
            SELECT *,
                   arrayMap(n -> span_trace[n], event_span) AS event_trace,
                   arrayMap(n -> span_span_id[n], event_span) AS event_span_id,
                   arrayMap(n -> span_service[n], event_span) AS event_service,
                   arrayMap(n -> span_request_id[n], event_span) AS event_span_request_id,
                   arrayMap(n -> span_module[n], event_span) AS event_span_module
            FROM (
                SELECT batch, record, verdict, span_scope, span_maps, span_resource_maps,
                       span_service, event_maps, event_index,
                       event_span, arrayMap(x -> gtb_hex(x), spans.trace_id) AS span_trace,
                       arrayMap(x -> gtb_hex(x), spans.span_id) AS span_span_id,
                       arrayMap(x -> gtb_hex(x), spans.parent_span_id) AS span_parent,
                       spans.name AS span_name, arrayMap(x -> gtb_kind(x), spans.kind) AS span_kind,
                       spans.start_time_unix_nano AS span_start,
                       spans.end_time_unix_nano AS span_end,
                       arrayMap(x -> gtb_status(x), spans.status.code) AS span_status_code,
                       spans.status.message AS span_status_message,
                       arrayMap(m -> m['{request_id}'], span_maps) AS span_request_id,
                       arrayMap(m -> m['{module}'], span_maps) AS span_module,
                       events.time_unix_nano AS event_time, events.name AS event_name
                FROM (
                    SELECT batch, record, verdict, spans, events, event_span, event_index,
                           span_scope, arraySlice(maps, resources + 1, length(spans)) AS span_maps,
                           arrayMap(r -> maps[r], span_resource) AS span_resource_maps,
                           arrayMap(r -> maps[r]['service.name'], span_resource) AS span_service,
                           arraySlice(maps, resources + length(spans) + 1) AS event_maps
                    FROM (
                        SELECT batch, record, verdict, spans, events, event_span, event_index,
                               span_resource, span_scope, resources,
                               arrayMap((start, size) -> gtb_map(
                                   arraySlice(all_keys, start, size),
                                   arraySlice(all_texts, start, size)),
                                   arrayPopBack(arrayCumSum(arrayConcat([1], attribute_lists))),
                                   attribute_lists) AS maps
                        FROM ({flatten}))))""",
    }
    return tables + [statement for name, statement in statements.items() if name in views]
