"""BLAKE2b-128 written in ClickHouse SQL: can today's event ids be computed by the store?

guardtrace's event id is ``blake2b(text, digest_size=16)`` (consumers/otlp_values.py
``event_id``), and ClickHouse has no BLAKE2b function. This writes RFC 7693's
compression in plain SQL over UInt64 columns (addition wraps, bitRotateRight, bitXor),
one nested SELECT per round, for texts of one block (at most 128 bytes: an event id's
text is 72 bytes plus the event's name). store_side_decoding.py runs it on real event
texts, checks every id against hashlib, and times it: the ids are right, but ClickHouse's
analyzer takes seconds to plan the query (within a round, each G step refers to the
previous one by alias, and the analyzer expands aliases in place), and a materialized
view is planned at every insert.
"""

from __future__ import annotations

_IV = (0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
       0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179)
_SIGMA = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    (14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3),
    (11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4),
    (7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8),
    (9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13),
    (2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9),
    (12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11),
    (13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10),
    (6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5),
    (10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0),
)
_ROUNDS = 12
_BLOCK_BYTES = 128
_DIGEST_BYTES = 16
# Parameter block word 0 for an unkeyed hash of _DIGEST_BYTES: fanout 1, depth 1.
_PARAMETERS = 0x01010000 | _DIGEST_BYTES
# The G function's columns then diagonals, and the message words each takes (by index
# into the round's sigma row).
_G_STEPS = ((0, 4, 8, 12, 0), (1, 5, 9, 13, 2), (2, 6, 10, 14, 4), (3, 7, 11, 15, 6),
            (0, 5, 10, 15, 8), (1, 6, 11, 12, 10), (2, 7, 8, 13, 12), (3, 4, 9, 14, 14))

MAX_TEXT_BYTES = _BLOCK_BYTES


def blake2b_128_query(table: str, column: str) -> str:
    """``SELECT column, id FROM table``: id = blake2b(column, digest_size=16).hexdigest(),
    for values of at most :data:`MAX_TEXT_BYTES` bytes (one block, which is the last)."""
    words = ", ".join(
        f"reinterpretAsUInt64(substring(rightPad({column}, {_BLOCK_BYTES}, '\\0'), {8 * i + 1}, 8))"
        f" AS m{i}" for i in range(16))
    h0 = [_IV[0] ^ _PARAMETERS, *_IV[1:]]
    state = [f"toUInt64({h}) AS v{i}" for i, h in enumerate(h0)]
    state += [f"toUInt64({_IV[i]}) AS v{i + 8}" for i in range(4)]
    state += [f"bitXor(toUInt64({_IV[4]}), toUInt64(length({column}))) AS v12",
              f"toUInt64({_IV[5]}) AS v13",
              f"bitXor(toUInt64({_IV[6]}), toUInt64({2**64 - 1})) AS v14",  # the last block
              f"toUInt64({_IV[7]}) AS v15"]
    sql = f"SELECT {column}, {words}, {', '.join(state)} FROM {table}"
    current = [f"v{i}" for i in range(16)]
    for round_no in range(_ROUNDS):
        sigma = _SIGMA[round_no % 10]
        v = list(current)
        steps: list[str] = []
        for a, b, c, d, word in _G_STEPS:
            prefix = f"r{round_no}_{a}{b}{c}{d}"
            x, y = f"m{sigma[word]}", f"m{sigma[word + 1]}"
            steps += [f"{v[a]} + {v[b]} + {x} AS {prefix}a1",
                      f"bitRotateRight(bitXor({v[d]}, {prefix}a1), 32) AS {prefix}d1",
                      f"{v[c]} + {prefix}d1 AS {prefix}c1",
                      f"bitRotateRight(bitXor({v[b]}, {prefix}c1), 24) AS {prefix}b1",
                      f"{prefix}a1 + {prefix}b1 + {y} AS {prefix}a2",
                      f"bitRotateRight(bitXor({prefix}d1, {prefix}a2), 16) AS {prefix}d2",
                      f"{prefix}c1 + {prefix}d2 AS {prefix}c2",
                      f"bitRotateRight(bitXor({prefix}b1, {prefix}c2), 63) AS {prefix}b2"]
            v[a], v[b], v[c], v[d] = (f"{prefix}a2", f"{prefix}b2", f"{prefix}c2",
                                      f"{prefix}d2")
        sql = f"SELECT *, {', '.join(steps)} FROM ({sql})"
        current = v
    h_out = [f"bitXor(bitXor(toUInt64({h0[i]}), {current[i]}), {current[i + 8]})"
             for i in range(_DIGEST_BYTES // 8)]
    digest = ", ".join(f"reinterpretAsFixedString({h})" for h in h_out)
    return f"SELECT {column}, lower(hex(concat({digest}))) AS id FROM ({sql})"
